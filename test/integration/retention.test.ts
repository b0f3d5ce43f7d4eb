// Retention (src/retention/) against the real Postgres store and read model, trying to break it:
// in-flight executions (one of them made to look finished in the read model), a step of an
// unfinished workflow, appends racing the run, a half-written archive file left by a "crash"
// and an archive directory that cannot be written. After it: `baton verify` and
// `baton projections verify` pass, every archived history replays from its file with no
// divergence, and what was in flight is exactly as it was and can still finish.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { executionArchivePath, workflowArchivePath } from '../../src/retention/archive-file.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { scheduleRetention, storedEventsGauge } from '../../src/retention/schedule.ts';
import pg from 'pg';
import { Registry } from 'prom-client';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { catchUpReadModel } from '../../src/readmodel/group-follow.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { startChainWorkflow } from '../support/chain-workflow.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const HOUR = 3_600_000;
/** One projector pass over what is stored now (the projector's batches, not waiting for stragglers). */
const catchUpReadModelOnce = (t: { db: { pool: pg.Pool }; store: Parameters<typeof catchUpReadModel>[0]['store'] }) => catchUpReadModel({ pool: t.db.pool, store: t.store });
/** baton_retention_runs_total of one registry, by outcome. */
async function runs(registry: Registry): Promise<Record<'finished' | 'failed' | 'skipped', number>> {
  const values = (await registry.getSingleMetric('baton_retention_runs_total')!.get()).values;
  const of = (outcome: string) => values.find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
  return { finished: of('finished'), failed: of('failed'), skipped: of('skipped') };
}
const deadline = () => new Date(Date.now() + 600_000).toISOString();
/** An hour from now, everything written in this test is older than a minute. */
const later = () => new Date(Date.now() + HOUR);

describe('retention', () => {
  const t = useTestStore({ max: 8 });
  let runtime: ExecutionRuntime;
  let archiveDir: string;
  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-archive-'));
  });
  afterAll(() => rm(archiveDir, { recursive: true, force: true }));

  async function started(worker: string, o: { workflowId?: string } = {}): Promise<string> {
    const { executionId } = await runtime.submit({ action: 'core.noop', input: { n: Math.random() }, ...o });
    await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: worker, attempt: 1, deadline: deadline() }, by: 'executor' },
    ]);
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${worker}` });
    return executionId;
  }
  async function completed(worker: string, o: { workflowId?: string } = {}): Promise<string> {
    const id = await started(worker, o);
    await runtime.dispatch(id, { type: 'ExecutionProgressed', data: { details: { half: true } }, by: `worker:${worker}` });
    await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { ok: id } }, by: `worker:${worker}` });
    return id;
  }

  /** A workflow of `steps` one-step chain; `finish` of them done; ended when all are. */
  async function workflow(steps: string[], finish: number): Promise<{ id: string; executions: string[] }> {
    const id = await startChainWorkflow(t.store, steps);
    const workflows = createWorkflowRuntime(t.store);
    const executions: string[] = [];
    for (const stepId of steps.slice(0, finish)) {
      const executionId = await completed('wf-worker', { workflowId: id });
      executions.push(executionId);
      await workflows.dispatch(id, { type: 'WorkflowStepScheduled', data: { stepId, executionId }, by: 'executor' });
      await workflows.dispatch(id, { type: 'WorkflowStepFinished', data: { stepId, executionId, outcome: 'Completed', result: { ok: executionId } }, by: 'executor' });
    }
    if (finish === steps.length) await workflows.dispatch(id, { type: 'WorkflowCompleted', data: {}, by: 'executor' });
    return { id, executions };
  }

  const streamLength = async (streamId: string) => (await t.store.readStream(streamId)).length;
  const row = async (id: string) => (await t.db.pool.query('SELECT status, revision FROM baton_read.executions WHERE execution_id = $1', [id])).rows[0] as { status: string; revision: string } | undefined;

  it('archives finished work and nothing else, and leaves a store and read model that verify', async () => {
    const done = [await completed('w1'), await completed('w1'), await completed('w2')];
    const inFlight = [await started('w1'), await started('w2')];
    const { executionId: waiting } = await runtime.submit({ action: 'core.noop', input: null });
    const finishedWorkflow = await workflow(['a', 'b'], 2);
    const unfinishedWorkflow = await workflow(['a', 'b'], 1);
    await catchUpFully(t.db.pool, t.store);

    // Break-it 1: the read model says an in-flight execution finished long ago.
    const liar = inFlight[0]!;
    await t.db.pool.query("UPDATE baton_read.executions SET status = 'Completed', finished_at = now() - interval '1 day' WHERE execution_id = $1", [liar]);
    // Break-it 2: an archive directory that cannot be created changes nothing.
    const blocker = path.join(archiveDir, 'not-a-dir');
    await writeFile(blocker, 'x');
    await expect(runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir: path.join(blocker, 'archive'), now: later })).rejects.toThrow(
      /^cannot write the archive in .*not-a-dir\/archive: a file stands where a directory must be \(.*\); nothing was removed from the store/,
    );
    expect(await streamLength(executionStreamId(done[0]!))).toBe(6);
    // Break-it 3: a crash left a half-written archive file behind.
    await writeFile(executionArchivePath(archiveDir, done[1]!), '{"format": "baton.exec');

    const lengths = new Map(await Promise.all([...inFlight, waiting, ...unfinishedWorkflow.executions].map(async (id) => [id, await streamLength(executionStreamId(id))] as const)));
    // Break-it 4: the in-flight executions keep moving while retention runs.
    let racing = true;
    const race = (async () => {
      let n = 0;
      while (racing) {
        for (const id of inFlight) {
          await runtime.dispatch(id, { type: 'ExecutionProgressed', data: { details: { n: n++ } }, by: `worker:${id === inFlight[0] ? 'w1' : 'w2'}` });
          lengths.set(id, lengths.get(id)! + 1);
        }
      }
    })();
    const dry = await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later, dryRun: true });
    expect(dry).toMatchObject({ executions: 5, workflows: 1, dryRun: true });
    expect(await streamLength(executionStreamId(done[0]!))).toBe(6);
    const s = await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
    racing = false;
    await race;

    expect(s).toMatchObject({ executions: 5, workflows: 1, dryRun: false });
    expect(s.skipped).toEqual(expect.arrayContaining([{ id: liar, reason: 'in flight: its execution is not final' }]));
    expect(s.skipped.some((k) => k.id === `workflow ${unfinishedWorkflow.id}`)).toBe(true);
    for (const id of [...done, ...finishedWorkflow.executions]) {
      expect(await streamLength(executionStreamId(id))).toBe(0);
      expect(await row(id)).toBeUndefined();
    }
    expect(await streamLength(workflowStreamId(finishedWorkflow.id))).toBe(0);
    for (const [id, n] of lengths) expect(await streamLength(executionStreamId(id)), id).toBe(n); // untouched, every racing append kept
    expect(await streamLength(workflowStreamId(unfinishedWorkflow.id))).toBe(3);
    const archived = await t.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_archived_streams WHERE NOT pending_delete');
    expect(Number(archived.rows[0]!.n)).toBe(6); // 5 executions and 1 workflow
    expect(JSON.parse(await readFile(workflowArchivePath(archiveDir, finishedWorkflow.id), 'utf8'))).toMatchObject({ workflowId: finishedWorkflow.id, executions: finishedWorkflow.executions });
    // The CLI says where an archived workflow went, not "not found".
    for (const args of [['workflow', 'status', finishedWorkflow.id], ['workflow', 'cancel', finishedWorkflow.id]]) {
      const r = await runBaton(args, { databaseUrl: t.db.url });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(new RegExp(`^baton: workflow ${finishedWorkflow.id} was archived at \\S+ \\(6 events, into .*workflow-${finishedWorkflow.id}\\.json, which lists its steps' executions\\)`));
    }

    // Put the lie back (what the projector wrote), and bring the read model up to date.
    await t.db.pool.query("UPDATE baton_read.executions SET status = 'Running', finished_at = NULL WHERE execution_id = $1", [liar]);
    await catchUpFully(t.db.pool, t.store);

    // A second run finds nothing more to do, and the in-flight ones can still finish.
    const again = await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
    expect(again).toMatchObject({ executions: 0, workflows: 0 });
    for (const id of inFlight) await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: 1 }, by: `worker:${id === inFlight[0] ? 'w1' : 'w2'}` });
    await catchUpFully(t.db.pool, t.store);
    expect((await row(liar))?.status).toBe('Completed');

    // The checks a user would run, as a user runs them.
    // Every id ever submitted is expected: the archived ones are not lost.
    const expectFile = path.join(archiveDir, 'expected.txt');
    await writeFile(expectFile, [...done, ...inFlight, waiting, ...finishedWorkflow.executions, ...unfinishedWorkflow.executions].join('\n'));
    const verify = await runBaton(['verify', '--expect', expectFile], { databaseUrl: t.db.url });
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const projections = await runBaton(['projections', 'verify'], { databaseUrl: t.db.url });
    expect(projections.code, projections.stdout + projections.stderr).toBe(0);
    for (const id of [...done, ...finishedWorkflow.executions]) {
      const replay = await runBaton(['replay', '--file', executionArchivePath(archiveDir, id), '--against', 'recorded'], { databaseUrl: null });
      expect(replay.code, replay.stdout + replay.stderr).toBe(0);
    }
  }, 120_000);

  it('a quiet store whose newest events it archived still verifies (the checkpoints stand at removed positions)', async () => {
    const kept = await started('w1');
    const done = [await completed('w1'), await completed('w2')];
    await catchUpFully(t.db.pool, t.store);
    const s = await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
    expect(s.executions).toBeGreaterThanOrEqual(2);
    for (const id of done) expect(await streamLength(executionStreamId(id))).toBe(0);
    // Nothing appended since: every checkpoint names an event retention removed.
    const { rows } = await t.db.pool.query<{ removed: boolean }>(
      `SELECT bool_and(EXISTS (SELECT 1 FROM baton_removed_positions r WHERE r.global_position = c.position)) AS removed FROM baton_projection_checkpoints c WHERE c.projection = 'executions'`,
    );
    expect(rows[0]!.removed).toBe(true);
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
    for (const args of [['verify'], ['projections', 'verify']]) {
      const r = await runBaton(args, { databaseUrl: t.db.url });
      expect(r.code, `${args.join(' ')}: ${r.stdout}${r.stderr}`).toBe(0);
    }
    expect((await row(kept))?.status).toBe('Running');
  }, 60_000);

  it('an id archived again (a key submitted after its archive) gets a file of its own, and the first file is kept', async () => {
    const key = `again-${randomUUID()}`;
    const finish = async (n: number) => {
      const { executionId } = await runtime.submit({ action: 'core.noop', input: { n }, idempotencyKey: key });
      await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: `round ${n}` }, by: 'executor' });
      await catchUpFully(t.db.pool, t.store);
      const s = await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
      expect(s.skipped.filter((k) => k.id === executionId)).toEqual([]);
      return executionId;
    };
    const id = await finish(1);
    expect(await finish(2)).toBe(id); // the key names the id, so the same file name comes back
    const inputOf = async (file: string) => (JSON.parse(await readFile(file, 'utf8')) as { events: { data: { input?: unknown } }[] }).events[0]!.data.input;
    expect(await inputOf(executionArchivePath(archiveDir, id))).toEqual({ n: 1 });
    const second = executionArchivePath(archiveDir, id).replace(/\.json$/, '.2.json');
    expect(await inputOf(second)).toEqual({ n: 2 });
    const { rows } = await t.db.pool.query('SELECT archive FROM baton_archived_streams WHERE stream_id = $1', [executionStreamId(id)]);
    expect(rows).toEqual([{ archive: second }]);
  }, 60_000);

  it('while the projector applies new executions of the same actions and workers, the aggregates stay equal to a rebuild', async () => {
    for (let i = 0; i < 60; i++) await completed('w-busy');
    await catchUpFully(t.db.pool, t.store);
    // Executions of the same action on the same worker keep coming and being projected, one small
    // batch at a time, while retention takes the old ones' counts back out, 5 a transaction.
    let retained = false;
    const load = (async () => {
      while (!retained) {
        await Promise.all([completed('w-busy'), completed('w-busy')]);
        await catchUpReadModelOnce(t);
      }
    })();
    try {
      await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later, batchSize: 5 });
    } finally {
      retained = true;
      await load;
    }
    await catchUpFully(t.db.pool, t.store);
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
  }, 60_000);

  it('two runs at once: one runs, the other is refused, and the read model still verifies', async () => {
    const done = [await completed('w5'), await completed('w5'), await completed('w6')];
    await catchUpFully(t.db.pool, t.store);
    const runs = await Promise.allSettled([0, 1].map(() => runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later })));
    expect(runs.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(runs.find((r) => r.status === 'rejected')).toMatchObject({ reason: { message: expect.stringMatching(/^another retention run is in progress on this store/) } });
    for (const id of done) expect(await streamLength(executionStreamId(id))).toBe(0);
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
  }, 60_000);

  it('runs on the executor\'s schedule (BATON_RETENTION), one executor at a time, and the gauge counts what is left', async () => {
    const id = await completed('w3');
    const keep = await started('w3');
    await catchUpFully(t.db.pool, t.store);
    await new Promise((r) => setTimeout(r, 1_100)); // older than the smallest age, 1s
    const registry = new Registry();
    storedEventsGauge(t.db.pool, registry, true);
    const before = (await registry.getSingleMetric('baton_eventstore_events')!.get()).values[0]!.value;
    const log = createLogger(loadConfig({ BATON_LOG_LEVEL: 'silent' }));
    const config = { olderThanMs: 1_000, archiveDir, intervalMs: 60_000 };
    // Two executors' schedules: both try at once, the lock lets one run.
    const a = scheduleRetention({ pool: t.db.pool, store: t.store, config, log, registry, firstRunAfterMs: 10 });
    const other = new Registry();
    const b = scheduleRetention({ pool: t.db.pool, store: t.store, config, log, registry: other, firstRunAfterMs: 10 });
    try {
      for (const until = Date.now() + 10_000; (await streamLength(executionStreamId(id))) > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
      expect(await streamLength(executionStreamId(id))).toBe(0);
      expect(await streamLength(executionStreamId(keep))).toBe(4);
    } finally {
      await a.stop();
      await b.stop();
    }
    expect(await readFile(executionArchivePath(archiveDir, id), 'utf8')).toContain('"format": "baton.execution-history"');
    // Its 6 events, and those of the first test's executions that finished at its end.
    const removed = async (r: Registry) => (await r.getSingleMetric('baton_retention_events_removed_total')!.get()).values[0]!.value;
    expect((await removed(registry)) + (await removed(other))).toBeGreaterThanOrEqual(6);
    expect((await runs(registry)).finished + (await runs(other)).finished).toBeGreaterThanOrEqual(1);
    expect(before).toBeGreaterThan(0);
  }, 60_000);

  it('counts a scheduled run that fails (baton_retention_runs_total{outcome="failed"}), and tries again next interval', async () => {
    const registry = new Registry();
    // Nothing listens there (this suite's port range): every run fails connecting.
    const unreachable = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:47399/none', connectionTimeoutMillis: 2_000 });
    const log = createLogger(loadConfig({ BATON_LOG_LEVEL: 'silent' }));
    const schedule = scheduleRetention({ pool: unreachable, store: t.store, config: { olderThanMs: 60_000, archiveDir, intervalMs: 20 }, log, registry, firstRunAfterMs: 10 });
    try {
      await until('two failed retention runs', async () => (await runs(registry)).failed >= 2, 10_000);
    } finally {
      await schedule.stop();
      await unreachable.end();
    }
    expect(await runs(registry)).toMatchObject({ finished: 0, skipped: 0 });
  }, 30_000);

  it('`baton retention run` archives from the command line (--dry-run first, --json), and `baton inspect` then reads the archive', async () => {
    const id = await completed('w4');
    await catchUpFully(t.db.pool, t.store);
    await new Promise((r) => setTimeout(r, 1_100));
    const dir = path.join(archiveDir, 'cli');
    const dry = await runBaton(['retention', 'run', '--older-than', '1s', '--archive', dir, '--dry-run', '--json'], { databaseUrl: t.db.url });
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, executions: 1 });
    expect(await streamLength(executionStreamId(id))).toBe(6);
    const run = await runBaton(['retention', 'run', '--older-than', '1s', '--archive', dir], { databaseUrl: t.db.url });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^archived 1 execution and 0 workflows finished before .* \(6 events\) to /);
    expect(await streamLength(executionStreamId(id))).toBe(0);
    const inspect = await runBaton(['inspect', id, '--json'], { databaseUrl: t.db.url });
    expect(inspect.code, inspect.stderr).toBe(0);
    expect(JSON.parse(inspect.stdout)).toMatchObject({ executionId: id, revision: 5, state: 'Completed' });
    // status and events read it there too (a script that runs them keeps working), saying so on stderr.
    const events = await runBaton(['events', id, '--json'], { databaseUrl: t.db.url });
    expect(events.code, events.stderr).toBe(0);
    expect((JSON.parse(events.stdout) as { type: string }[]).map((e) => e.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionProgressed', 'ExecutionCompleted']);
    expect(events.stderr).toMatch(new RegExp(`^\\(archived at \\S+: read from .*execution-${id}\\.json\\)\n$`));
    const status = await runBaton(['status', id], { databaseUrl: t.db.url });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^status\s+Completed$/m);
    expect(status.stdout).toMatch(/^revision\s+5$/m);
    const bad = await runBaton(['retention', 'run', '--older-than', '90 days'], { databaseUrl: t.db.url });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--older-than.*must be an age such as 90d/);
  }, 60_000);
});
