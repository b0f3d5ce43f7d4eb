// The projector following several projections as one group (src/readmodel/group-follow.ts)
// against a real Postgres: one transaction per batch for all of them, every event applied
// exactly once when one projection stands apart, and nothing applied twice when another
// writer moves a member's checkpoint.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { projections, type Projection } from '../../projections/index.ts';
import { workersProjection } from '../../projections/workers.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { readCheckpoint } from '../../src/readmodel/checkpoints.ts';
import { catchUpProjection, catchUpReadModel, followGroup } from '../../src/readmodel/group-follow.ts';
import { startProjector } from '../../src/readmodel/projector-host.ts';
import { rebuildProjection } from '../../src/readmodel/rebuild.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { until as untilEvery } from '../support/until.ts';

const until = (what: string, probe: () => Promise<boolean>, ms = 20_000) => untilEvery(what, probe, ms, { everyMs: 20 });

const deadline = () => new Date(Date.now() + 30_000).toISOString();


/** What a projector's transactions did: checkpoint rows moved and NOTIFYs sent, per COMMIT. */
interface Txn {
  checkpoints: number;
  notifies: number;
  /** What the server said synchronous_commit was inside it, asked just before COMMIT. */
  synchronousCommit?: string;
  /** The same, asked on the same connection just after COMMIT. */
  synchronousCommitAfter?: string;
}

/** A pool that records each transaction its clients commit (the projector's only writes), and the executions rows it reads back. */
function recordingPool(url: string) {
  const committed: Txn[] = [];
  const executionRowsAsked = { keys: 0 };
  // Each connection starts with synchronous_commit on, whatever the server's default (the test
  // cluster's is off): so the projector's own `off`, and its end with the transaction, show.
  const pool = new pg.Pool({ connectionString: url, max: 6, options: '-c synchronous_commit=on' });
  pool.on('connect', (client) => {
    let open: Txn | undefined;
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string } | undefined)?.text ?? '');
      if (text.startsWith('BEGIN')) open = { checkpoints: 0, notifies: 0 };
      else if (text === 'COMMIT' && open) {
        const txn = open;
        committed.push(txn);
        const show = () => (query('SHOW synchronous_commit') as Promise<pg.QueryResult<{ synchronous_commit: string }>>).then((r) => r.rows[0]!.synchronous_commit);
        return (async () => {
          txn.synchronousCommit = await show();
          const result = await query(...args);
          txn.synchronousCommitAfter = await show();
          return result;
        })();
      }
      else if (text === 'ROLLBACK') open = undefined;
      else if (open && text.includes('UPDATE baton_projection_checkpoints')) open.checkpoints++;
      else if (open && text.includes('pg_notify')) open.notifies++;
      if (text.includes('CROSS JOIN LATERAL (SELECT * FROM "baton_read"."executions"')) executionRowsAsked.keys += ((args[1] as unknown[][])[0] ?? []).length;
      return query(...args);
    };
  });
  return { pool, committed, executionRowsAsked };
}

describe('projector groups', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;
  let runtime: ExecutionRuntime;
  let recording: ReturnType<typeof recordingPool>;
  let projectorStore: PostgresEventStore;

  beforeEach(async () => {
    db = await createTestDatabase({ max: 12 });
    store = createPostgresEventStore(db.pool);
    runtime = createExecutionRuntime(store);
    recording = recordingPool(db.url);
    // The projector's store on the projector's pool, as `baton projector` has it: the events are then
    // in the read model's database for it too (the timeline a view of them), as for the helpers below.
    projectorStore = createPostgresEventStore(recording.pool);
  });
  afterEach(async () => {
    await projectorStore.close();
    await recording.pool.end();
    await store.close();
    await db.drop();
  });

  /** A worker and `n` executions in a spread of states. */
  async function seed(n: number, worker = `w-${randomUUID().slice(0, 8)}`) {
    await store.append(workerStreamId(worker), [{ eventId: randomUUID(), type: 'WorkerStarted', data: { actions: ['core.echo'], runtimes: ['node'], capacity: 2 }, metadata: { by: `worker:${worker}`, occurredAt: new Date().toISOString() } }], { expectedRevision: 'no_stream' });
    for (let i = 0; i < n; i++) {
      const { executionId } = await runtime.submit({ action: 'core.echo', input: { i }, maxAttempts: 1 });
      if (i % 3 === 0) continue;
      await runtime.dispatch(executionId, [
        { type: 'SchedulingStarted', data: {}, by: 'executor' },
        { type: 'ExecutionHandedOff', data: { workerId: worker, attempt: 1, deadline: deadline() }, by: 'executor' },
      ]);
      await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${worker}` });
      if (i % 3 === 1) await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: { i } }, by: `worker:${worker}` });
    }
  }

  /** Per projection: events it follows in the store, and events its checkpoint says it applied. */
  async function counts() {
    const out: Record<string, { stored: number; applied: number; position: bigint }> = {};
    for (const p of projections) {
      const r = await db.pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events WHERE stream_id LIKE ANY($1::text[])', [p.streamPrefixes.map((x) => `${x}%`)]);
      const c = await readCheckpoint(db.pool, p.name);
      out[p.name] = { stored: Number(r.rows[0]!.n), applied: Number(c.eventsApplied), position: c.position };
    }
    return out;
  }
  const caughtUp = async () => Object.values(await counts()).every((c) => c.applied === c.stored);

  async function batchesOf(registry: Registry): Promise<Record<string, number>> {
    const metric = await registry.getSingleMetric('baton_projection_batches_total')!.get();
    return Object.fromEntries(metric.values.map((v) => [String(v.labels.projection), v.value]));
  }

  /**
   * Run the projector until a projection apart joins the group, append `seedAfter` more, and
   * check that every projection applied every event once, all at one position, verified.
   */
  async function joinThenFollow(o: { seedAfter: number; batchSize?: number }): Promise<void> {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log, driftIntervalMs: 0, ...(o.batchSize !== undefined && { batchSize: o.batchSize }) });
    try {
      await until('the join', async () => lines.some((l) => l.includes('brought level with the group')));
      await seed(o.seedAfter);
      await until('the read model to catch up', caughtUp);
    } finally {
      await projector.stop();
    }
    const c = await counts();
    for (const [name, x] of Object.entries(c)) expect(x.applied, name).toBe(x.stored);
    expect(new Set(Object.values(c).map((x) => x.position)).size).toBe(1);
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  }

  it('on a fresh database follows all four projections as one group, one transaction per batch', async () => {
    const registry = new Registry();
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), registry, driftIntervalMs: 0 });
    try {
      await seed(30);
      await until('the read model to catch up', caughtUp);
      // The lag reads each projection's next event after a checkpoint that may be another's event.
      const lag = await registry.getSingleMetric('baton_projection_lag_seconds')!.get();
      expect(lag.values.map((v) => [v.labels.projection, v.value]).sort()).toEqual(projections.map((p) => [p.name, 0]).sort());
    } finally {
      await projector.stop();
    }
    const c = await counts();
    // Every event once, and the four checkpoints moved together.
    for (const [name, x] of Object.entries(c)) expect(x.applied, name).toBe(x.stored);
    expect(new Set(Object.values(c).map((x) => x.position)).size).toBe(1);
    expect(c.executions!.position).not.toBe(0n);
    // One transaction per batch, moving every checkpoint, with at most one NOTIFY (< 200 ids).
    const txns = recording.committed.filter((t) => t.checkpoints > 0);
    expect(txns.length).toBeGreaterThan(0);
    expect(txns.every((t) => t.checkpoints === projections.length)).toBe(true);
    expect(txns.every((t) => t.notifies <= 1)).toBe(true);
    // Derived rows commit without waiting for their WAL flush (group-follow.ts says why)…
    expect(new Set(txns.map((t) => t.synchronousCommit))).toEqual(new Set(['off']));
    // …and only they: the setting ends with the transaction, each connection keeps its own.
    expect(new Set(txns.map((t) => t.synchronousCommitAfter))).toEqual(new Set(['on']));
    const batches = await batchesOf(registry);
    expect(batches.executions).toBeGreaterThan(0);
    expect(txns.length).toBeLessThan(Object.values(batches).reduce((a, b) => a + b, 0));
    // The rows are what a per-projection rebuild of the same events gives (verify builds each
    // projection alone into a scratch schema, up to the group's checkpoint, and compares).
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });

  it('a projection at its own position follows alone and the others as a group, every event once', async () => {
    await seed(6);
    // A rebuild leaves workers at its own last event; the others are still at 0.
    await store.settled(); // an open transaction elsewhere on the server would hold events back
    await rebuildProjection({ pool: db.pool, store, projection: workersProjection });
    const before = await counts();
    expect(before.workers!.applied).toBe(before.workers!.stored);
    expect(before.executions!.position).toBe(0n);
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), driftIntervalMs: 0 });
    try {
      await seed(12);
      await until('the read model to catch up', caughtUp);
    } finally {
      await projector.stop();
    }
    const c = await counts();
    for (const [name, x] of Object.entries(c)) expect(x.applied, name).toBe(x.stored);
    expect(c.executions!.position).toBe(c.execution_events!.position);
    expect(c.executions!.position).toBe(c.schedules!.position);
    const sizes = new Set(recording.committed.filter((t) => t.checkpoints > 0).map((t) => t.checkpoints));
    expect([...sizes].sort()).toEqual([1, 3]);
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });

  it('brings a projection that stands apart level with the group, then follows them together', async () => {
    await seed(6);
    await store.settled(); // an open transaction elsewhere on the server would hold events back
    await rebuildProjection({ pool: db.pool, store, projection: workersProjection });
    await seed(6);
    // The others as a group to the end; workers behind, at its own event.
    await store.settled();
    await catchUpReadModel({ pool: db.pool, store, projections: projections.filter((p) => p.name !== 'workers') });
    const apart = await counts();
    expect(apart.workers!.position).not.toBe(apart.executions!.position);
    expect(apart.workers!.applied).toBeLessThan(apart.workers!.stored);
    await joinThenFollow({ seedAfter: 6 });
    const txns = recording.committed.filter((t) => t.checkpoints > 0);
    expect(txns.some((t) => t.checkpoints === projections.length)).toBe(true);
  });

  it('moves a projection with none of its events in between straight to the group, reading nothing else', async () => {
    await seed(10);
    await store.settled();
    // As a database the per-projection projector left: schedules (no events) far behind the others.
    await catchUpReadModel({ pool: db.pool, store, projections: projections.filter((p) => p.name !== 'schedules') });
    expect((await counts()).schedules!.position).toBe(0n);
    // Batches of one event: reading its way over the others' events (4 batches at most) could not reach the group.
    await joinThenFollow({ seedAfter: 2, batchSize: 1 });
  });

  it('a projection that cannot apply a batch follows apart, and the others go on without it', async () => {
    let poisoned = true;
    const poison: Projection = {
      ...workersProjection,
      apply: (...args) => (poisoned ? Promise.reject(new Error('poison: this batch cannot be applied')) : workersProjection.apply(...args)),
    };
    const list = projections.map((p) => (p.name === 'workers' ? poison : p));
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), driftIntervalMs: 0, projections: list, regroupIntervalMs: 300 });
    try {
      await seed(6);
      await until('the executions projection to catch up while the workers projection fails', async () => {
        const c = await counts();
        return c.executions!.applied === c.executions!.stored && c.execution_events!.applied === c.execution_events!.stored;
      });
      expect(projector.problems()).toEqual(['projection workers: poison: this batch cannot be applied']);
      expect((await counts()).workers!.applied).toBe(0);
      poisoned = false;
      await until('every projection to catch up', caughtUp);
      await until('one position again (joined)', async () => new Set(Object.values(await counts()).map((x) => x.position)).size === 1);
      expect(projector.problems()).toEqual([]);
    } finally {
      await projector.stop();
    }
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });

  it('names a projection that cannot apply a batch once in its problem, alone as in a group', async () => {
    const poison: Projection = { ...workersProjection, apply: () => Promise.reject(new Error('poison: this batch cannot be applied')) };
    // Alone from the start: a unit of one, whose failure once read "projection workers: projection workers: …".
    // One event and then quiet: the failure once waited for the subscription's next event to be
    // reported at all (the read pending when the batch failed).
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), driftIntervalMs: 0, projections: [poison] });
    try {
      await seed(0);
      await until('the problem to show', async () => projector.problems().length > 0, 10_000);
      expect(projector.problems()).toEqual(['projection workers: poison: this batch cannot be applied']);
    } finally {
      await projector.stop();
    }
  });

  it('rebuilds a changed projection in the background while the others follow, then follows it too', async () => {
    await seed(3);
    // An open transaction elsewhere on the server would hold these events back: the rebuild would
    // find none, swap in empty (rightly: workers then follows from 0) and never wait at the gate.
    await store.settled();
    await db.pool.query(`UPDATE baton_projection_checkpoints SET version = 0 WHERE projection = 'workers'`);
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    // The rebuild's aside build waits at the gate; live applies do not.
    const slowWorkers: Projection = { ...workersProjection, apply: async (client, schema, events) => (schema === 'baton_read' || (await gate), workersProjection.apply(client, schema, events)) };
    const list = projections.map((p) => (p.name === 'workers' ? slowWorkers : p));
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), driftIntervalMs: 0, projections: list });
    try {
      await seed(3);
      await until('the others to catch up while workers rebuilds', async () => {
        const c = await counts();
        return ['executions', 'execution_events', 'schedules'].every((n) => c[n]!.applied === c[n]!.stored);
      });
      expect((await readCheckpoint(db.pool, 'workers')).version).toBe(0);
      release();
      await until('the read model to catch up', caughtUp);
      expect((await readCheckpoint(db.pool, 'workers')).version).toBe(workersProjection.version);
    } finally {
      release();
      await projector.stop();
    }
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });

  it('stops when stopped while it reads the checkpoints to start a round', async () => {
    // stop() comes while run() awaits its first checkpoint reads: the round then starts after the
    // abort event. A rebuild that finishes ends a round just as the read model is caught up, and
    // a stop right then (this file's rebuild test, 1 run in 6–8) hung the same way.
    const projector = startProjector({ pool: recording.pool, store: projectorStore, log: pino({ level: 'silent' }), driftIntervalMs: 0 });
    await projector.stop();
  }, 10_000);

  it('a follower given a signal aborted already applies nothing and returns', async () => {
    await seed(2);
    await store.settled();
    expect(await followGroup({ pool: recording.pool, store: projectorStore, projections, from: 0n, signal: AbortSignal.abort() })).toBe('stopped');
    for (const c of Object.values(await counts())) expect(c.applied).toBe(0);
  }, 10_000);

  it('does not read back the executions rows it wrote itself, batch after batch, and they equal a rebuild', async () => {
    const ac = new AbortController();
    const following = followGroup({ pool: recording.pool, store: projectorStore, projections, from: 0n, signal: ac.signal, batchSize: 3 });
    try {
      // In steps, each caught up before the next: every execution's events span several batches.
      const worker = `w-${randomUUID().slice(0, 8)}`;
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await runtime.submit({ action: 'core.echo', input: { i }, maxAttempts: 1 })).executionId);
      await until('the requests projected', caughtUp);
      for (const id of ids) {
        await runtime.dispatch(id, [
          { type: 'SchedulingStarted', data: {}, by: 'executor' },
          { type: 'ExecutionHandedOff', data: { workerId: worker, attempt: 1, deadline: deadline() }, by: 'executor' },
        ]);
      }
      await until('the handoffs projected', caughtUp);
      for (const id of ids) await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${worker}` });
      await until('the starts projected', caughtUp);
      for (const id of ids.slice(0, 3)) await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: 1 }, by: `worker:${worker}` });
      await until('the completions projected', caughtUp);
    } finally {
      ac.abort();
    }
    expect(await following).toBe('stopped');
    // Each execution was asked for once, when its first event came (it was not there yet); every
    // later batch knew it from the one before. Read back each time, it would be 6 + 6 + 6 + 3.
    expect(recording.executionRowsAsked.keys).toBe(6);
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });

  it('another writer moving a member: the group rolls back every member and applies nothing twice', async () => {
    await seed(4);
    // Executions moves alone, as another projector would: the group at 0 is now stale.
    await store.settled();
    await catchUpProjection({ pool: db.pool, store, projection: projections.find((p) => p.name === 'executions')! });
    expect((await counts()).executions!.position).not.toBe(0n);
    const outcome = await followGroup({ pool: recording.pool, store: projectorStore, projections, from: 0n, signal: AbortSignal.timeout(10_000) });
    expect(outcome).toBe('moved');
    // execution_events is moved before executions (name order): its move was rolled back too.
    const stale = await counts();
    expect(stale.execution_events!.applied).toBe(0);
    expect(stale.execution_events!.position).toBe(0n);
    expect((await db.pool.query('SELECT 1 FROM baton_read.execution_events')).rowCount).toBe(0);
    expect(stale.executions!.applied).toBe(stale.executions!.stored);

    // Live: two projectors at once, and a third writer moving executions alone meanwhile.
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const one = startProjector({ pool: recording.pool, store: projectorStore, log, driftIntervalMs: 0 });
    const two = startProjector({ pool: db.pool, store, log, driftIntervalMs: 0 });
    try {
      for (let round = 0; round < 4; round++) {
        await seed(5);
        await catchUpProjection({ pool: db.pool, store, projection: projections.find((p) => p.name === 'executions')! });
      }
      await until('the read model to catch up', caughtUp);
    } finally {
      await Promise.all([one.stop(), two.stop()]);
    }
    expect(lines.some((l) => l.includes('checkpoint moved by another writer'))).toBe(true);
    const c = await counts();
    for (const [name, x] of Object.entries(c)) expect(x.applied, name).toBe(x.stored);
    expect(await verifyReadModel({ pool: db.pool, store })).toMatchObject({ ok: true, differences: [] });
  });
});
