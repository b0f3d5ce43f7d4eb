// The fault-injection harness: a private Postgres cluster and a private nats-server that the
// scenarios may kill and restart at will (never the machine's shared ones), Baton hosts as real
// child processes (`node bin/baton.js executor|worker|projector`), and a scenario object that
// submits executions, injects faults, waits (bounded) for every execution to be terminal, runs
// the invariant checker and records one summary row per scenario.
//
// Postgres refuses to run as root: as root, initdb and pg_ctl run as the `postgres` system user
// (runuser) on a data dir that user owns; as anyone else they run as that user.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { connect as natsConnect } from 'nats';
import { afterAll, beforeAll } from 'vitest';
import { finalStatuses, foldExecution, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { executionStreamId, type ExecutionEvent } from '../../schemas/events.ts';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, type ExecutionRuntime, type SubmitRequest } from '../../src/runtime/execution-runtime.ts';
import { checkInvariants, describeReport, type InvariantReport } from '../../src/verify/invariants.ts';
import { freePort } from '../support/free-port.ts';

export const REPO_ROOT = path.resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const FAULT_ACTIONS = 'test/fixtures/actions/fault-actions.ts';
const RESULTS_FILE = path.join(REPO_ROOT, '.baton', 'fault-results.md');
const TMP_PREFIX = 'baton-faults-';
const NATS_SERVER = ['/usr/sbin/nats-server', '/usr/local/bin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p)) ?? 'nats-server';

/**
 * The executor and worker settings every Baton child gets, so that a dead worker or a handoff
 * nobody starts is noticed in seconds, not the production minutes. The names are the config
 * contract of the executor's timeouts (schedule-to-start reclaim, stale-heartbeat detection).
 */
export const FAST_TIMEOUTS: Readonly<Record<string, string>> = {
  BATON_SCHEDULE_TO_START_TIMEOUT: '2s',
  BATON_HEARTBEAT_INTERVAL: '500ms',
  BATON_HEARTBEAT_STALE_AFTER: '3',
  BATON_START_TO_CLOSE_TIMEOUT: '60s',
  BATON_SHUTDOWN_TIMEOUT: '2s',
};

const execFileAsync = promisify(execFile);
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Poll `probe` until it is true; throws after `ms`, naming `what` (and `detail()` when given). */
export async function until(what: string, probe: () => Promise<boolean> | boolean, ms: number, detail?: () => string): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${detail ? `\n${detail()}` : ''}`);
    await sleep(100);
  }
}


const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

// ---------------------------------------------------------------------------
// Cleanup of what a killed run left behind, and of what this run leaves if it dies.

const exitHooks = new Set<() => void>();
let exitHookInstalled = false;
function onExit(hook: () => void): () => void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // Synchronous only: the process is going away. Kills children and stops servers.
    process.once('exit', () => {
      for (const h of exitHooks) {
        try {
          h();
        } catch {
          /* keep going: every other resource still needs its hook */
        }
      }
    });
  }
  exitHooks.add(hook);
  return () => exitHooks.delete(hook);
}

/** Remove private clusters and NATS stores of earlier runs whose process died without cleaning up. */
function sweepAbandoned(pgBin: string | undefined): void {
  const tmp = os.tmpdir();
  for (const name of readdirSync(tmp).filter((n) => n.startsWith(TMP_PREFIX))) {
    const dir = path.join(tmp, name);
    const owner = Number(readFileSafe(path.join(dir, 'owner.pid')));
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) continue;
    if (!Number.isInteger(owner) || owner <= 0) {
      // No owner file yet: maybe a run still setting up. Leave anything younger than a minute.
      const age = Date.now() - (statSafe(dir)?.mtimeMs ?? 0);
      if (age < 60_000) continue;
    }
    const postmaster = Number(readFileSafe(path.join(dir, 'data', 'postmaster.pid'))?.split('\n')[0]);
    if (pgBin && postmaster > 0 && isAlive(postmaster)) {
      try {
        execFileSync(...pgCommand(path.join(pgBin, 'pg_ctl'), ['-D', path.join(dir, 'data'), '-m', 'immediate', '-w', '-t', '10', 'stop']), { stdio: 'ignore' });
      } catch {
        /* gone already */
      }
    }
    const nats = Number(readFileSafe(path.join(dir, 'nats.pid')));
    if (nats > 0 && isAlive(nats)) process.kill(nats, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}
function readFileSafe(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
function statSafe(file: string) {
  try {
    return statSync(file);
  } catch {
    return undefined;
  }
}

/** A scratch dir under the OS tmpdir, owned by this process (a later run sweeps it if this one dies). */
export async function makeRunDir(kind: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `${TMP_PREFIX}${kind}-`));
  await fs.writeFile(path.join(dir, 'owner.pid'), String(process.pid));
  return dir;
}

// ---------------------------------------------------------------------------
// A private Postgres cluster.

const runningAsRoot = process.getuid?.() === 0;
/** As root, the server's tools run as `postgres` (Postgres refuses root). */
function pgCommand(bin: string, args: string[]): [string, string[]] {
  return runningAsRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

async function findPgBin(): Promise<string> {
  const root = '/usr/lib/postgresql';
  const versions = (await fs.readdir(root).catch(() => [] as string[])).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = path.join(root, v, 'bin');
    if (existsSync(path.join(bin, 'initdb')) && existsSync(path.join(bin, 'pg_ctl'))) return bin;
  }
  throw new Error(`no PostgreSQL server binaries (initdb, pg_ctl) under ${root}/*/bin: install the postgresql server package`);
}

export class PrivatePostgres {
  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
  ) {}

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  static async start(): Promise<PrivatePostgres> {
    const bin = await findPgBin();
    sweepAbandoned(bin);
    const dir = await makeRunDir('pg');
    const port = await freePort();
    const server = new PrivatePostgres(bin, dir, port);
    const forget = onExit(() => {
      try {
        execFileSync(...pgCommand(path.join(bin, 'pg_ctl'), ['-D', server.dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop']), { stdio: 'ignore' });
      } catch {
        /* not running */
      }
      rmSync(dir, { recursive: true, force: true });
    });
    server.forgetExitHook = forget;
    try {
      if (runningAsRoot) {
        await fs.chmod(dir, 0o755);
        const { stdout } = await execFileAsync('id', ['-u', 'postgres']);
        const { stdout: gid } = await execFileAsync('id', ['-g', 'postgres']);
        await fs.chown(dir, Number(stdout.trim()), Number(gid.trim()));
      }
      await server.pg('initdb', ['-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale', '--no-sync'], 120_000);
      // fsync off: an immediate stop is a crash of the server, not of the machine, so every
      // write() already reached the kernel and recovery is exact. synchronous_commit stays on:
      // with it off, an acknowledged commit could be lost by `pg_ctl stop -m immediate`.
      await fs.appendFile(
        path.join(server.dataDir, 'postgresql.conf'),
        [
          '',
          '# baton fault harness',
          "listen_addresses = '127.0.0.1'",
          `port = ${port}`,
          "unix_socket_directories = ''",
          'fsync = off',
          'max_connections = 200',
          "shared_buffers = '64MB'",
          '',
        ].join('\n'),
      );
      await server.start();
    } catch (err) {
      await server.destroy();
      throw err;
    }
    return server;
  }

  private forgetExitHook: () => void = () => {};

  private async pg(tool: string, args: string[], timeoutMs: number): Promise<string> {
    try {
      const { stdout } = await execFileAsync(...pgCommand(path.join(this.bin, tool), args), { timeout: timeoutMs });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${tool} ${args.join(' ')} failed: ${e.stderr || e.message}\n${await this.logTail()}`, { cause: err });
    }
  }

  async logTail(lines = 20): Promise<string> {
    const text = await fs.readFile(path.join(this.dir, 'postgres.log'), 'utf8').catch(() => '');
    return text.split('\n').slice(-lines).join('\n');
  }

  /** Start (or restart after a stop): waits until it accepts connections. */
  async start(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dir, 'postgres.log'), '-w', '-t', '60', 'start'], 90_000);
  }

  /** `pg_ctl stop -m immediate`: every backend dies at once, like a crash; recovery runs on the next start. */
  async stopImmediately(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'], 60_000);
  }

  async admin<T>(fn: (c: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> {
    const client = new pg.Client({ connectionString: this.url(database), application_name: 'baton-fault-harness' });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** A fresh database with every migration applied; returns its URL. */
  async createDatabase(name: string): Promise<string> {
    await this.admin((c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
    const pool = new pg.Pool({ connectionString: this.url(name), max: 2 });
    try {
      await migrateAll(pool);
    } finally {
      await pool.end();
    }
    return this.url(name);
  }

  async dropDatabase(name: string): Promise<void> {
    await this.admin((c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
  }

  /** pg_terminate_backend every session of a Baton host (application_name baton-<component>); returns how many. */
  async terminateBatonConnections(database: string): Promise<number> {
    return this.admin(async (c) => {
      const r = await c.query<{ pid: number }>(
        `SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity
          WHERE datname = $1 AND application_name IN ('baton-executor', 'baton-worker', 'baton-projector', 'baton-api')`,
        [database],
      );
      return r.rowCount ?? 0;
    });
  }

  async destroy(): Promise<void> {
    try {
      if (existsSync(path.join(this.dataDir, 'postmaster.pid'))) {
        await this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', '-t', '30', 'stop'], 60_000).catch(() =>
          this.pg('pg_ctl', ['-D', this.dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop'], 60_000),
        );
      }
    } finally {
      await fs.rm(this.dir, { recursive: true, force: true });
      this.forgetExitHook();
    }
  }
}

// ---------------------------------------------------------------------------
// A private nats-server with JetStream.

export class PrivateNats {
  private proc: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly output: string[] = [];
  private forgetExitHook: () => void = () => {};

  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }
  get storeDir(): string {
    return path.join(this.dir, 'jetstream');
  }

  static async start(): Promise<PrivateNats> {
    sweepAbandoned(undefined);
    const nats = new PrivateNats(await makeRunDir('nats'), await freePort());
    nats.forgetExitHook = onExit(() => {
      nats.proc?.kill('SIGKILL');
      rmSync(nats.dir, { recursive: true, force: true });
    });
    await nats.start();
    return nats;
  }

  /** Start on the same port and store (JetStream keeps its streams and consumers across restarts). */
  async start(): Promise<void> {
    if (this.proc) throw new Error('nats-server is already running');
    const proc = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const keep = (d: Buffer) => {
      this.output.push(d.toString());
      if (this.output.length > 200) this.output.shift();
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    await fs.writeFile(path.join(this.dir, 'nats.pid'), String(proc.pid));
    await until(
      `nats-server with JetStream on ${this.url}`,
      async () => {
        if (proc.exitCode !== null) throw new Error(`nats-server exited with ${proc.exitCode}:\n${this.output.join('').slice(-2000)}`);
        try {
          const nc = await natsConnect({ servers: this.url, reconnect: false, timeout: 1_000 });
          try {
            await (await nc.jetstreamManager({ timeout: 1_000 })).getAccountInfo();
            return true;
          } finally {
            await nc.close();
          }
        } catch {
          return false;
        }
      },
      20_000,
    );
  }

  /** SIGTERM (SIGKILL after 10 s) and wait for it to exit. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.proc = undefined;
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(killer);
    }
  }

  async restart(o: { downMs?: number; wipe?: boolean } = {}): Promise<void> {
    await this.stop();
    if (o.wipe) await fs.rm(this.storeDir, { recursive: true, force: true });
    if (o.downMs) await sleep(o.downMs);
    await this.start();
  }

  async destroy(): Promise<void> {
    try {
      await this.stop();
    } finally {
      await fs.rm(this.dir, { recursive: true, force: true });
      this.forgetExitHook();
    }
  }
}

// ---------------------------------------------------------------------------
// Baton hosts as child processes.

export class BatonProcess {
  readonly output: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private stopped = false;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    const keep = (d: Buffer) => {
      this.output.push(d.toString());
      if (this.output.length > 400) this.output.shift();
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.proc.pid!;
  }
  alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }
  /** SIGKILL, SIGTERM, SIGSTOP, SIGCONT, … */
  signal(signal: NodeJS.Signals): void {
    if (!this.alive()) throw new Error(`${this.name} is not running (exit ${this.proc.exitCode ?? this.proc.signalCode})`);
    this.proc.kill(signal);
    if (signal === 'SIGSTOP') this.stopped = true;
    if (signal === 'SIGCONT') this.stopped = false;
  }
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.alive()) {
      if (this.stopped && signal !== 'SIGKILL') this.signal('SIGCONT');
      this.proc.kill(signal);
    }
    return this.exited;
  }
  tail(chars = 2_000): string {
    return this.output.join('').slice(-chars);
  }
}

// ---------------------------------------------------------------------------
// The environment one test file shares, and one scenario on it.

export interface FaultEnvironment {
  pg: PrivatePostgres;
  nats: PrivateNats;
}

/**
 * A private Postgres and nats-server for the enclosing test file: started in beforeAll,
 * stopped and removed in afterAll, after the summary table is printed and written.
 */
export function useFaultEnvironment(title: string): () => FaultEnvironment {
  let env: FaultEnvironment | undefined;
  beforeAll(async () => {
    const [pgServer, nats] = await Promise.allSettled([PrivatePostgres.start(), PrivateNats.start()]);
    if (pgServer.status === 'rejected' || nats.status === 'rejected') {
      if (pgServer.status === 'fulfilled') await pgServer.value.destroy();
      if (nats.status === 'fulfilled') await nats.value.destroy();
      throw pgServer.status === 'rejected' ? pgServer.reason : (nats as PromiseRejectedResult).reason;
    }
    env = { pg: pgServer.value, nats: nats.value };
  }, 180_000);
  afterAll(async () => {
    await reportSummaries(title);
    const e = env;
    env = undefined;
    await Promise.allSettled([e?.pg.destroy(), e?.nats.destroy()]);
  }, 120_000);
  return () => {
    if (!env) throw new Error('the fault environment exists only inside the tests of the file that called useFaultEnvironment()');
    return env;
  };
}

export interface FaultSummary {
  scenario: string;
  executions: number;
  faultsInjected: number;
  lost: number;
  duplicatedRuns: number;
  stuck: number;
  /**
   * Longest time from a fault until every execution it hit was terminal; null when
   * some never were, undefined without faults.
   */
  maxRecoveryMs: number | null | undefined;
  /** The execution (and fault) that took maxRecoveryMs. */
  slowest?: string;
  violations: number;
  passed: boolean;
  note?: string;
}

const summaries: FaultSummary[] = [];

interface Fault {
  what: string;
  /** When the fault was over (the process killed, the server back): recovery counts from here. */
  at: number;
  /** Executions it hit: underway (or held by the process it hit) when it was injected. */
  hits: string[];
}

export interface WorkerOptions {
  id: string;
  capacity?: number;
  shutdownTimeoutMs?: number;
}

export class FaultScenario {
  readonly submitted = new Set<string>();
  readonly processes: BatonProcess[] = [];
  readonly faults: Fault[] = [];
  /** executionId → when its terminal event was recorded (ms). */
  readonly terminalAt = new Map<string, number>();
  readonly pool: pg.Pool;
  readonly store: PostgresEventStore;
  readonly runtime: ExecutionRuntime;
  readonly run = randomBytes(3).toString('hex');
  private report: InvariantReport | undefined;
  private note: string | undefined;

  private constructor(
    readonly env: FaultEnvironment,
    readonly name: string,
    readonly database: string,
    readonly databaseUrl: string,
  ) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: 6, application_name: 'baton-fault-harness', connectionTimeoutMillis: 5_000 });
    // Faults break the harness's own connections too: an idle client's error must not crash the run.
    this.pool.on('error', () => undefined);
    this.store = createPostgresEventStore(this.pool);
    this.runtime = createExecutionRuntime(this.store);
  }

  /** A fresh database (migrated) and a fresh JetStream store for one scenario. */
  static async open(env: FaultEnvironment, name: string): Promise<FaultScenario> {
    const database = `baton_fault_${name.replace(/[^a-z0-9]+/gi, '_').toLowerCase().slice(0, 30)}_${randomBytes(3).toString('hex')}`;
    const url = await env.pg.createDatabase(database);
    await env.nats.restart({ wipe: true });
    return new FaultScenario(env, name, database, url);
  }

  // --- processes

  spawn(name: string, args: string[], extraEnv: Record<string, string> = {}): BatonProcess {
    const proc = spawn(process.execPath, ['bin/baton.js', ...args], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        ...FAST_TIMEOUTS,
        BATON_DATABASE_URL: this.databaseUrl,
        BATON_NATS_URL: this.env.nats.url,
        BATON_LOG_LEVEL: 'warn',
        NODE_ENV: 'production',
        ...extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const child = new BatonProcess(name, proc);
    this.processes.push(child);
    const forget = onExit(() => child.alive() && proc.kill('SIGKILL'));
    void child.exited.then(forget);
    return child;
  }

  executor(name = 'executor'): BatonProcess {
    return this.spawn(name, ['executor', '--transport', 'nats', '--metrics-port', '0']);
  }

  /** A worker offering the built-ins and the fault actions; resolves once it is heartbeating. */
  async worker(o: WorkerOptions): Promise<BatonProcess> {
    const args = ['worker', '--id', o.id, '--capacity', String(o.capacity ?? 8), '--transport', 'nats', '--metrics-port', '0', '--actions', FAULT_ACTIONS];
    if (o.shutdownTimeoutMs !== undefined) args.push('--shutdown-timeout', String(o.shutdownTimeoutMs));
    const child = this.spawn(`worker ${o.id}`, args);
    await until(
      `worker ${o.id} to heartbeat`,
      async () => {
        if (!child.alive()) throw new Error(`worker ${o.id} exited:\n${child.tail()}`);
        // This process's own beat: a row it has only claimed is draining (no work yet), and a
        // row of a killed predecessor under the same id has another pid.
        const r = await this.pool.query('SELECT 1 FROM baton_worker_liveness WHERE worker_id = $1 AND pid = $2 AND NOT draining', [o.id, child.proc.pid]);
        return (r.rowCount ?? 0) > 0;
      },
      30_000,
    );
    return child;
  }

  projector(name = 'projector'): BatonProcess {
    return this.spawn(name, ['projector', '--metrics-port', '0']);
  }

  /** Worker ids are `<prefix>-<run>-<n>`: unique per scenario run. */
  workerId(n: number | string): string {
    return `f-${this.run}-${n}`;
  }

  // --- load

  /** Submit `n` executions, `batch` at a time; only acknowledged submissions count. */
  async submit(n: number, request: (i: number) => SubmitRequest, o: { batch?: number; pauseMs?: number } = {}): Promise<string[]> {
    const batch = o.batch ?? 50;
    const ids: string[] = [];
    for (let i = 0; i < n; i += batch) {
      const results = await Promise.all(Array.from({ length: Math.min(batch, n - i) }, (_, j) => this.runtime.submit(request(i + j))));
      for (const r of results) {
        this.submitted.add(r.executionId);
        ids.push(r.executionId);
      }
      if (o.pauseMs) await sleep(o.pauseMs);
    }
    return ids;
  }

  /**
   * Keep submitting until `stop()`, tolerating failures (the database may be down): a
   * submission that was not acknowledged was never promised. Returns the stop function.
   */
  submitContinuously(request: (i: number) => SubmitRequest, o: { batch?: number; pauseMs?: number; max?: number } = {}): { stop: () => Promise<{ acknowledged: number; refused: number }> } {
    let running = true;
    let acknowledged = 0;
    let refused = 0;
    const loop = (async () => {
      let i = 0;
      while (running && (o.max === undefined || i < o.max)) {
        const size = Math.min(o.batch ?? 20, o.max === undefined ? Infinity : o.max - i);
        const results = await Promise.allSettled(Array.from({ length: size }, (_, j) => this.runtime.submit(request(i + j))));
        i += size;
        for (const r of results) {
          if (r.status === 'fulfilled') {
            this.submitted.add(r.value.executionId);
            acknowledged++;
          } else refused++;
        }
        await sleep(refused > 0 && results.every((r) => r.status === 'rejected') ? 250 : (o.pauseMs ?? 50));
      }
    })();
    return {
      stop: async () => {
        running = false;
        await loop;
        return { acknowledged, refused };
      },
    };
  }

  // --- observation

  /**
   * Bring terminalAt up to date for every submitted execution; returns how many are not terminal.
   * Final is what the machine says: the state its last event led to (metadata.stateAfter).
   */
  async refreshTerminal(): Promise<number> {
    const open = [...this.submitted].filter((id) => !this.terminalAt.has(id));
    for (let i = 0; i < open.length; i += 2_000) {
      const chunk = open.slice(i, i + 2_000);
      const r = await this.pool.query<{ stream_id: string; state_after: string | null; recorded_at: Date }>(
        `SELECT e.stream_id, e.metadata->>'stateAfter' AS state_after, e.recorded_at FROM baton_streams s
           JOIN baton_events e ON e.stream_id = s.stream_id AND e.revision = s.revision
          WHERE s.stream_id = ANY($1::text[])`,
        [chunk.map(executionStreamId)],
      );
      for (const row of r.rows) {
        if (row.state_after !== null && finalStatuses.has(row.state_after)) this.terminalAt.set(row.stream_id.slice('execution-'.length), row.recorded_at.getTime());
      }
    }
    return this.submitted.size - this.terminalAt.size;
  }

  /** Every submitted execution not final yet, folded through the machine (one read of their events). */
  async openSnapshots(): Promise<Map<string, ExecutionSnapshot>> {
    await this.refreshTerminal();
    const open = [...this.submitted].filter((id) => !this.terminalAt.has(id));
    const r = await this.pool.query<{ stream_id: string; type: string; data: unknown; metadata: Record<string, unknown> }>(
      'SELECT stream_id, type, data, metadata FROM baton_events WHERE stream_id = ANY($1::text[]) ORDER BY stream_id, revision',
      [open.map(executionStreamId)],
    );
    const events = new Map<string, ExecutionEvent[]>();
    for (const row of r.rows) {
      const list = events.get(row.stream_id) ?? [];
      list.push({ type: row.type, data: row.data, metadata: row.metadata } as ExecutionEvent);
      events.set(row.stream_id, list);
    }
    return new Map([...events].map(([streamId, list]) => [streamId.slice('execution-'.length), foldExecution(list)]));
  }

  /** Executions in `state` with the baton on `workerId`, as the machine says. */
  async heldIn(state: 'Scheduled' | 'Running', workerId: string): Promise<string[]> {
    return [...(await this.openSnapshots())].filter(([, s]) => statusOf(s) === state && s.context.workerId === workerId).map(([id]) => id);
  }

  /** Wait until every submitted execution is terminal, or `ms` passes; true when all are. */
  async waitForAllTerminal(ms: number): Promise<boolean> {
    const end = Date.now() + ms;
    for (;;) {
      const open = await this.refreshTerminal().catch(() => Infinity);
      if (open === 0) return true;
      if (Date.now() > end) return false;
      await sleep(200);
    }
  }

  /** Fail the scenario unless every submitted execution is terminal within `ms`. */
  async expectAllTerminal(ms: number): Promise<void> {
    if (!(await this.waitForAllTerminal(ms))) throw new Error(`not every execution was terminal within ${Math.round(ms / 1000)} s`);
  }

  /** Wait until at least `n` submitted executions are terminal (bounded). */
  async waitForTerminalCount(n: number, ms: number): Promise<void> {
    await until(
      `${n} terminal executions`,
      async () => {
        await this.refreshTerminal().catch(() => undefined);
        return this.terminalAt.size >= n;
      },
      ms,
    );
  }

  /** Executions running on this worker now. */
  async runningOn(workerId: string): Promise<string[]> {
    return this.heldIn('Running', workerId);
  }

  /** What a worker holds: executions running on it, or handed off to it and not started. */
  async heldBy(workerId: string): Promise<string[]> {
    return [...(await this.runningOn(workerId)), ...(await this.handedOffTo(workerId))];
  }

  /** Executions handed off to this worker and not started. */
  async handedOffTo(workerId: string): Promise<string[]> {
    return this.heldIn('Scheduled', workerId);
  }

  async eventsOf(executionId: string) {
    return this.store.readStream(executionStreamId(executionId));
  }

  /** Events of a worker's lifecycle stream (`worker-<id>`). */
  async workerEvents(workerId: string): Promise<string[]> {
    return (await this.store.readStream(`worker-${workerId}`)).map((e) => e.type);
  }

  // --- faults

  /**
   * Executions a worker holds or the executor is moving: past Requested (or back in it, awaiting
   * a retry decision) and not final. (Those waiting in Requested for a free worker are load, not
   * something a fault hit.)
   */
  async underway(): Promise<string[]> {
    return [...(await this.openSnapshots())].filter(([, s]) => statusOf(s) !== 'Requested' || s.context.retryPending).map(([id]) => id);
  }

  /**
   * Inject a fault: note the executions it hits (by default every one underway), run `inject`,
   * and count recovery from when it returns (a process killed, a server back up).
   */
  async fault(what: string, inject: () => Promise<void> | void, o: { hits?: () => Promise<string[]> } = {}): Promise<string[]> {
    const hits = await (o.hits ?? (() => this.underway()))();
    await inject();
    this.faults.push({ what, at: Date.now(), hits });
    return hits;
  }

  /** Record a fault injected by hand: it was over at `at`, and hit `hits`. */
  recordFault(what: string, at: number, hits: string[]): void {
    this.faults.push({ what, at, hits });
  }

  /** The slowest recovery: from a fault to the last execution it hit turning terminal. */
  slowestRecovery(): { ms: number | null; fault?: string; executionId?: string } {
    let slowest: { ms: number | null; fault?: string; executionId?: string } = { ms: 0 };
    for (const f of this.faults) {
      for (const id of f.hits) {
        const t = this.terminalAt.get(id);
        if (t === undefined) return { ms: null, fault: f.what, executionId: id };
        if (t - f.at > (slowest.ms ?? 0)) slowest = { ms: Math.round(t - f.at), fault: f.what, executionId: id };
      }
    }
    return slowest;
  }

  // --- verdict

  /** The invariant checker over the scenario's store: every execution must be terminal. */
  async check(o: { readModel?: boolean } = {}): Promise<InvariantReport> {
    await this.refreshTerminal().catch(() => undefined);
    this.report = await checkInvariants(this.store, {
      expectedExecutionIds: this.submitted,
      requireTerminal: true,
      ...(o.readModel && { pool: this.pool }),
    });
    return this.report;
  }

  /** Wait until the projector has applied every execution event (bounded). */
  async waitForProjector(ms: number): Promise<void> {
    await until(
      'the projector to apply every execution event',
      async () => {
        const r = await this.pool.query<{ events: string; applied: string | null }>(
          `SELECT (SELECT count(*) FROM baton_events WHERE stream_id LIKE 'execution-%') AS events,
                  (SELECT events_applied FROM baton_projection_checkpoints WHERE projection = 'executions') AS applied`,
        );
        return r.rows[0]!.applied !== null && Number(r.rows[0]!.applied) === Number(r.rows[0]!.events);
      },
      ms,
    );
  }

  addNote(note: string): void {
    this.note = this.note ? `${this.note}; ${note}` : note;
  }

  diagnostics(): string {
    const report = this.report ? `--- invariant report\n${describeReport(this.report)}\n` : '';
    return `${report}${this.processes.map((p) => `--- ${p.name} (${p.alive() ? 'running' : `exited ${p.proc.exitCode ?? p.proc.signalCode}`})\n${p.tail(1_500)}`).join('\n')}`;
  }

  /** Record the summary row (call it whatever the outcome), stop every child, drop the database. */
  async close(passed: boolean): Promise<void> {
    const r = this.report;
    const recovery = this.slowestRecovery();
    summaries.push({
      scenario: this.name,
      executions: this.submitted.size,
      faultsInjected: this.faults.length,
      lost: r?.lost.length ?? NaN,
      duplicatedRuns: r?.duplicatedRuns ?? NaN,
      stuck: r?.stuck.length ?? this.submitted.size - this.terminalAt.size,
      maxRecoveryMs: this.faults.length === 0 ? undefined : recovery.ms,
      ...(recovery.executionId !== undefined && { slowest: `${recovery.executionId} after "${recovery.fault}"` }),
      violations: r?.violations.length ?? NaN,
      passed,
      ...(this.note !== undefined && { note: this.note }),
    });
    await Promise.all(this.processes.map((p) => p.kill('SIGKILL')));
    // The store's LISTEN connection (held by any subscribe) must go before the pool can end.
    await bounded('closing the event store', this.store.close(), 10_000);
    await bounded('ending the pool', this.pool.end(), 10_000);
    await bounded('dropping the database', this.env.pg.dropDatabase(this.database), 30_000);
  }
}

/** Cleanup that must neither hang the run nor hide the scenario's own failure: logs and goes on. */
async function bounded(what: string, p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      console.warn(`fault harness: ${what} took more than ${ms} ms; going on`);
      resolve();
    }, ms);
  });
  try {
    await Promise.race([p.then(() => undefined, (err: unknown) => console.warn(`fault harness: ${what} failed: ${(err as Error).message}`)), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Run one scenario: open it, run `body`, record its row whatever happens. `body` throws (an
 * expect) to fail; the scenario's diagnostics are appended to the failure.
 */
export async function runScenario(env: FaultEnvironment, name: string, body: (s: FaultScenario) => Promise<void>): Promise<void> {
  const s = await FaultScenario.open(env, name);
  let passed = false;
  try {
    await body(s);
    passed = true;
  } catch (err) {
    if (err instanceof Error) err.message = `${err.message}\n${s.diagnostics()}`;
    s.addNote(String((err as Error).message ?? err).split('\n')[0]!.slice(0, 160));
    throw err;
  } finally {
    await s.close(passed);
  }
}

// ---------------------------------------------------------------------------
// The summary table.

const cell = (v: number | null | undefined) => (v === undefined ? '—' : v === null ? 'never' : Number.isNaN(v) ? '?' : v.toLocaleString('en'));

export function summaryTable(rows: readonly FaultSummary[]): string {
  const header = '| scenario | executions | faults | lost | duplicated runs | stuck | violations | max recovery ms | result |';
  const rule = '|---|---:|---:|---:|---:|---:|---:|---:|---|';
  const lines = rows.map(
    (r) =>
      `| ${r.scenario} | ${cell(r.executions)} | ${cell(r.faultsInjected)} | ${cell(r.lost)} | ${cell(r.duplicatedRuns)} | ${cell(r.stuck)} | ${cell(r.violations)} | ${cell(r.maxRecoveryMs)} | ${r.passed ? 'pass' : `FAIL${r.note ? `: ${r.note.replace(/\|/g, '\\|')}` : ''}`} |`,
  );
  const slowest = rows.filter((r) => r.slowest).map((r) => `- ${r.scenario}: slowest recovery ${cell(r.maxRecoveryMs)} ms, execution ${r.slowest}`);
  return [header, rule, ...lines, ...(slowest.length > 0 ? ['', ...slowest] : [])].join('\n');
}

/** Print this file's rows and write them as this file's section of .baton/fault-results.md. */
async function reportSummaries(title: string): Promise<void> {
  if (summaries.length === 0) return;
  const table = summaryTable(summaries);
  console.log(`\nfault injection: ${title}\n${table}\n`);
  const begin = `<!-- ${title} -->`;
  const end = `<!-- /${title} -->`;
  const section = `${begin}\n## ${title}\n\n${new Date().toISOString()}\n\n${table}\n${end}`;
  await fs.mkdir(path.dirname(RESULTS_FILE), { recursive: true });
  const previous = await fs.readFile(RESULTS_FILE, 'utf8').catch(() => '# Fault-injection results\n');
  const at = previous.indexOf(begin);
  const stop = previous.indexOf(end);
  const next = at >= 0 && stop > at ? `${previous.slice(0, at)}${section}${previous.slice(stop + end.length)}` : `${previous.trimEnd()}\n\n${section}\n`;
  await fs.writeFile(RESULTS_FILE, next);
}
