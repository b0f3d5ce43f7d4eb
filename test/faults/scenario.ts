// One fault scenario on the shared environment: a fresh database and JetStream store, Baton hosts
// as child processes, load submitted through the runtime, faults injected and the executions they
// hit noted, a bounded wait for every execution to be terminal, the invariant checker's verdict,
// and one summary row whatever the outcome.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { finalStatuses, foldExecution, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { executionStreamId, type ExecutionEvent } from '../../schemas/events.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, type ExecutionRuntime, type SubmitRequest } from '../../src/runtime/execution-runtime.ts';
import { checkInvariants, describeReport, type InvariantReport } from '../../src/verify/invariants.ts';
import { BatonProcess, FAST_TIMEOUTS, FAULT_ACTIONS, REPO_ROOT } from './baton-process.ts';
import type { FaultEnvironment } from './environment.ts';
import { onExit } from './run-dirs.ts';
import { recordSummary } from './summary.ts';
import { sleep, until } from './wait.ts';

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
    recordSummary({
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
