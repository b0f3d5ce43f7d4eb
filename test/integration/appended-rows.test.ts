// BATON_EXECUTION_ROWS=appenders against a real Postgres: the processes that append write the
// executions rows from their own snapshots (src/readmodel/appended-rows.ts), equal to what the
// projector's fold gives; two writers racing never move a row back nor count a change twice; and
// the projector's repair pass folds only the rows nobody wrote.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { executionRowFromDb, executionsRepairProjection } from '../../projections/executions.projection.ts';
import { foldExecutionStream } from '../../projections/executions.ts';
import { projectionsFor } from '../../projections/index.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startAppendedRowWriter, type AppendedRowWriter } from '../../src/readmodel/appended-rows.ts';
import { catchUpReadModel } from '../../src/readmodel/group-follow.ts';
import { startProjector } from '../../src/readmodel/projector-host.ts';
import { ensureReadModel, inTransaction } from '../../src/readmodel/tables.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { createExecutionRuntime, type ExecutionRuntime, type SubmitOutcome } from '../../src/runtime/execution-runtime.ts';
import { useTestStore } from '../support/test-store.ts';

const log = createLogger({ ...loadConfig({}), logLevel: 'silent' });
const submittedId = (o: SubmitOutcome) => {
  if (!o.ok) throw o.error;
  return o.result.executionId;
};
const deadline = () => new Date(Date.now() + 30_000).toISOString();

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('executions rows written by the appenders (BATON_EXECUTION_ROWS=appenders)', () => {
  const t = useTestStore({ max: 12 });
  const writers: AppendedRowWriter[] = [];
  /** A runtime with a row writer, as every process is in appenders mode. */
  function appender(o: { waitMs?: number } = {}): { runtime: ExecutionRuntime; rows: AppendedRowWriter } {
    const runtime = createExecutionRuntime(t.store);
    const rows = startAppendedRowWriter({ runtime, pool: t.db.pool, log, ...o });
    writers.push(rows);
    return { runtime, rows };
  }

  async function runTo(runtime: ExecutionRuntime, id: string, end: 'Completed' | 'Failed' | 'Running') {
    await runtime.dispatch(id, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
    ]);
    await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    if (end === 'Completed') await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { ok: 1 } }, by: 'worker:w1' });
    if (end === 'Failed') await runtime.dispatch(id, { type: 'ExecutionFailed', data: { error: { message: 'boom', type: 'Boom' }, retryable: false }, by: 'worker:w1' });
  }

  const rowOf = async (id: string) => {
    const r = await t.db.pool.query('SELECT * FROM baton_read.executions WHERE execution_id = $1', [id]);
    return r.rows[0] && executionRowFromDb(r.rows[0]);
  };
  const foldOf = async (id: string) => foldExecutionStream(await t.store.readStream(executionStreamId(id)));
  const statsOf = async (action: string) => (await t.db.pool.query('SELECT requested, queued, running, completed, failed FROM baton_read.action_stats WHERE action = $1', [action])).rows[0];

  beforeAll(async () => {
    await ensureReadModel(t.db.pool);
    return async () => {
      for (const w of writers) await w.stop();
    };
  });

  it('writes the rows of its own changes, equal to the fold of their streams, without a projector', async () => {
    const { runtime, rows } = appender();
    const action = `test.rows-${randomUUID().slice(0, 8)}`;
    const ids = {
      requested: (await runtime.submit({ action, input: { n: 1 }, idempotencyKey: `k-${randomUUID()}`, tags: { team: 'a' } })).executionId,
      running: (await runtime.submit({ action, maxAttempts: 1 })).executionId,
      completed: (await runtime.submit({ action, maxAttempts: 1 })).executionId,
      failed: (await runtime.submit({ action, maxAttempts: 1 })).executionId,
    };
    await runTo(runtime, ids.running, 'Running');
    await runTo(runtime, ids.completed, 'Completed');
    await runTo(runtime, ids.failed, 'Failed');
    await rows.flush();
    for (const [name, id] of Object.entries(ids)) expect(await rowOf(id), name).toEqual(await foldOf(id));
    expect(await statsOf(action)).toEqual({ requested: '4', queued: '1', running: '1', completed: '1', failed: '1' });
    // No projector has run: the checkpoint has not moved.
    const checkpoint = await t.db.pool.query(`SELECT position FROM baton_projection_checkpoints WHERE projection = 'executions'`);
    expect(checkpoint.rows[0].position).toBe('0');
  });

  it('writes each row once per flush, and tells the API which executions changed', async () => {
    const { runtime, rows } = appender();
    const listener = await t.db.pool.connect();
    const heard: string[] = [];
    try {
      listener.on('notification', (n) => heard.push(...(n.payload ?? '').split(',')));
      await listener.query('LISTEN baton_executions_changed');
      await rows.flush();
      const { executionId } = await runtime.submit({ action: 'test.notify' });
      await runTo(runtime, executionId, 'Completed');
      await rows.flush();
      await until('the notification', async () => heard.includes(executionId));
      expect(heard.filter((id) => id === executionId)).toHaveLength(1);
    } finally {
      await listener.query('UNLISTEN *');
      listener.release();
    }
  });

  it('never moves a row back, and counts each change once, when two writers race', async () => {
    // a writes only when flushed, so its older rows come last.
    const a = appender({ waitMs: 60_000 });
    const b = appender();
    const action = `test.race-${randomUUID().slice(0, 8)}`;
    const ids = (await a.runtime.submitMany(Array.from({ length: 20 }, () => ({ action, maxAttempts: 1 })))).map(submittedId);
    // b moves them on from what it loads (a process that did not submit them), and writes first.
    for (const id of ids) await runTo(b.runtime, id, 'Completed');
    await b.rows.flush();
    // a's rows are older (revision 0): written after, they must change nothing.
    await a.rows.flush();
    for (const id of ids) expect((await rowOf(id))?.status).toBe('Completed');
    expect(await statsOf(action)).toEqual({ requested: '20', queued: '0', running: '0', completed: '20', failed: '0' });

    // At once, on the same rows and stats: each change still counted once.
    const more = (await a.runtime.submitMany(Array.from({ length: 20 }, () => ({ action, maxAttempts: 1 })))).map(submittedId);
    for (const id of more) await runTo(b.runtime, id, 'Failed');
    await Promise.all([a.rows.flush(), b.rows.flush()]);
    for (const id of more) expect(await rowOf(id)).toEqual(await foldOf(id));
    expect(await statsOf(action)).toEqual({ requested: '40', queued: '0', running: '0', completed: '20', failed: '20' });
  });

  it('repairs only the rows nobody wrote: the projector folds those, and leaves the written ones alone', async () => {
    const { runtime, rows } = appender();
    const silent = createExecutionRuntime(t.store); // appends without a writer, as a crashed process leaves them
    const action = `test.repair-${randomUUID().slice(0, 8)}`;
    const written = (await runtime.submit({ action })).executionId;
    await runTo(runtime, written, 'Completed');
    const lost = (await silent.submit({ action })).executionId;
    await runTo(silent, lost, 'Running');
    await rows.flush();
    expect(await rowOf(lost)).toBeUndefined();

    const events = [...(await t.store.readStream(executionStreamId(written))), ...(await t.store.readStream(executionStreamId(lost)))];
    const result = await inTransaction(t.db.pool, (client) => executionsRepairProjection.apply(client, 'baton_read', events));
    expect(result.changedExecutions).toEqual([lost]);
    expect(await rowOf(lost)).toEqual(await foldOf(lost));
    expect(await statsOf(action)).toEqual({ requested: '2', queued: '0', running: '1', completed: '1', failed: '0' });
  });

  it('with the projector repairing, the read model equals a rebuild (verify)', async () => {
    const { runtime, rows } = appender();
    const silent = createExecutionRuntime(t.store);
    const action = `test.verify-${randomUUID().slice(0, 8)}`;
    const projector = startProjector({ pool: t.db.pool, store: t.store, log, executionRows: 'appenders', driftIntervalMs: 0 });
    try {
      const mine = (await runtime.submitMany(Array.from({ length: 10 }, () => ({ action })))).map(submittedId);
      for (const id of mine) await runTo(runtime, id, 'Completed');
      const lost = (await silent.submit({ action })).executionId;
      await runTo(silent, lost, 'Failed');
      await rows.flush();
      // The projector leaves the appenders their time (REPAIR_HOLD_BACK_MS), then repairs `lost`.
      await until('the lost row repaired', async () => (await rowOf(lost))?.status === 'Failed');
    } finally {
      await projector.stop();
    }
    await catchUpReadModel({ pool: t.db.pool, store: t.store, projections: projectionsFor('appenders') });
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
    expect(await statsOf(action)).toEqual({ requested: '11', queued: '0', running: '0', completed: '10', failed: '1' });
  });
});
