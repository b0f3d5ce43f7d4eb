// The embedded Postgres server process: spawning it, telling when it is ready, finding one
// that runs already (its postmaster.pid), and stopping it.
//
// It runs in a process group of its own (detached). A terminal's Ctrl-C signals the whole
// foreground group; were the server in it, it would stop at once (SIGINT is its fast
// shutdown) while Baton, signalled too, was still draining: every host then fails its last
// appends and logs connection errors until a second Ctrl-C. Alone in its group it hears only
// Baton, which stops it last. A Baton that dies without stopping it (SIGKILL) leaves it
// running; the next baton process on the data dir adopts and, in the end, stops it.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { isAlive, signal } from '../process/identity.ts';
import { EMBEDDED_PG_PASSWORD, EMBEDDED_PG_USER, EmbeddedPostgresError, postgresBinary, type RunAs } from './embedded-cluster.ts';

export interface ServerProcess {
  readonly child: ChildProcess;
  exited(): boolean;
  /** Fast shutdown (SIGINT), immediate (SIGQUIT) if it hangs; resolves when the process is gone. Idempotent. */
  stop(): Promise<void>;
  /** Whether stop() was called: an exit before that is a crash. */
  stopping(): boolean;
}

/**
 * Spawn `postgres -D clusterDir -p port` and wait until it serves that cluster on that port.
 * On failure nothing is left running, and the error carries the server's last lines.
 */
export async function launchServer(o: {
  clusterDir: string;
  port: number;
  runAs: RunAs | null;
  ephemeral?: boolean;
  deadline: number;
  onLog: (line: string) => void;
  logTail: string[];
}): Promise<ServerProcess> {
  const flags = [
    '-c', 'listen_addresses=127.0.0.1',
    // No Unix socket: everything connects over TCP, and a socket lock file in /tmp could
    // collide with another cluster on the same port or be owned by another user.
    '-c', 'unix_socket_directories=',
    ...(o.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
  const child = spawn(await postgresBinary(), ['-D', o.clusterDir, '-p', String(o.port), ...flags], {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    // The server's own messages in English, which startFailure() reads.
    env: { ...process.env, LC_MESSAGES: 'C' },
    cwd: '/', // the project dir may be one the `postgres` user cannot enter
    ...(o.runAs?.uid !== undefined && { uid: o.runAs.uid, gid: o.runAs.gid }),
  });
  let exited = false;
  const gone = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', (err) => {
      o.onLog(String(err));
      exited = true;
      resolve();
    });
  });
  let partial = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line.trim()) o.onLog(line.trimEnd());
  });

  let stopping: Promise<void> | undefined;
  const server: ServerProcess = {
    child,
    exited: () => exited,
    stopping: () => stopping !== undefined,
    stop: () =>
      (stopping ??= (async () => {
        if (exited || child.pid === undefined) return;
        signal(child.pid, 'SIGINT');
        const quit = setTimeout(() => signal(child.pid!, 'SIGQUIT'), 15_000);
        const kill = setTimeout(() => signal(child.pid!, 'SIGKILL'), 25_000);
        await gone;
        clearTimeout(quit);
        clearTimeout(kill);
      })()),
  };
  try {
    if (await waitUntilReady(o.port, o.clusterDir, o.deadline, () => exited)) {
      throw new EmbeddedPostgresError(startFailure(o.port, o.logTail));
    }
  } catch (err) {
    await Promise.race([server.stop().catch(() => undefined), sleep(5_000)]);
    if (err instanceof EmbeddedPostgresError) throw err;
    throw new EmbeddedPostgresError(`the embedded Postgres did not become ready: ${String(err)}\n${o.logTail.join('\n')}`, {
      cause: err,
    });
  }
  return server;
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

/** Stop a server this process did not spawn (an adopted one): fast shutdown, then immediate. */
export async function stopByPid(pid: number, clusterDir: string): Promise<void> {
  signal(pid, 'SIGINT');
  for (let waited = 0; await isPostmasterOf(pid, clusterDir); waited += 50) {
    if (waited === 15_000) signal(pid, 'SIGQUIT');
    if (waited > 20_000) throw new EmbeddedPostgresError(`the embedded Postgres (pid ${pid}) did not stop`);
    await sleep(50);
  }
}

// ---- finding a running server ---------------------------------------------------------

export type PidFileState = { state: 'none' } | { state: 'stale'; pid: number } | { state: 'running'; pid: number; port: number };

export async function inspectPidFile(clusterDir: string): Promise<PidFileState> {
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
export async function isPostmasterOf(pid: number, clusterDir: string): Promise<boolean> {
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

export async function postmasterPid(clusterDir: string): Promise<number | undefined> {
  const s = await inspectPidFile(clusterDir).catch(() => undefined);
  return s?.state === 'running' ? s.pid : undefined;
}

/**
 * Poll until the server on `port` accepts connections and really is the one on `clusterDir`
 * (so a foreign server on the same port is never mistaken for ours). Returns true, without
 * waiting further, as soon as `gone()` says the server process has exited.
 */
export async function waitUntilReady(port: number, clusterDir: string, deadline: number, gone: () => boolean): Promise<boolean> {
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

export async function ensureDatabase(port: number, database: string): Promise<void> {
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
