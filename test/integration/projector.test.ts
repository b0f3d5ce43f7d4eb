// The projector against a real Postgres: batches with their checkpoint, rebuild aside and
// swap, verify, drift sampling, and the live follower with its notifications.
import { randomUUID } from 'node:crypto';
import { startRelay } from '../support/tcp-relay.ts';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionEventsProjection } from '../../projections/execution-events.ts';
import { executionsProjection } from '../../projections/executions.projection.ts';
import { workersProjection } from '../../projections/workers.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { onLostConnections } from '../../src/db/lost-connections.ts';
import { createLogger } from '../../src/log.ts';
import { loadConfig } from '../../src/config.ts';
import { readCheckpoint } from '../../src/readmodel/checkpoints.ts';
import { eventSourceOf } from '../../src/readmodel/event-source.ts';
import { sampleExecutionDrift } from '../../src/readmodel/drift.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from '../../src/readmodel/notifications.ts';
import { startProjector } from '../../src/readmodel/projector-host.ts';
import { createProjectionTables, inTransaction } from '../../src/readmodel/tables.ts';
import { listEvents } from '../../src/api/read-model-queries.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { applyGroupBatch } from '../../src/readmodel/group-follow.ts';
import { rebuildProjection } from '../../src/readmodel/rebuild.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { catchUpFully } from '../support/read-model.ts';
import { allEvents } from '../support/workflow-cluster.ts';
import { useTestStore } from '../support/test-store.ts';

const log = createLogger({ ...loadConfig(), logLevel: 'silent' });
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

describe('projector', () => {
  const t = useTestStore({ max: 12 });
  let runtime: ExecutionRuntime;
  const ids: Record<string, string> = {};

  /** Drive executions into a spread of states, a worker stream included. */
  async function seed() {
    await t.store.append(workerStreamId('w1'), [{ eventId: randomUUID(), type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 2 }, metadata: { by: 'worker:w1', occurredAt: new Date().toISOString() } }], { expectedRevision: 'no_stream' });
    ids.requested = (await runtime.submit({ action: 'core.noop', input: { n: 1 }, idempotencyKey: `k-${randomUUID()}` })).executionId;
    for (const name of ['completed', 'running', 'failed']) {
      const { executionId } = await runtime.submit({ action: 'core.echo', input: { name }, maxAttempts: 1 });
      ids[name] = executionId;
      await runtime.dispatch(executionId, [
        { type: 'SchedulingStarted', data: {}, by: 'executor' },
        { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
      ]);
      await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    }
    await runtime.dispatch(ids.completed!, { type: 'ExecutionCompleted', data: { result: { ok: 1 } }, by: 'worker:w1' });
    await runtime.dispatch(ids.failed!, { type: 'ExecutionFailed', data: { error: { message: 'boom', type: 'Boom' }, retryable: false }, by: 'worker:w1' });
  }

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    await seed();
    await catchUpFully(t.db.pool, t.store);
  });

  it('projects every execution as the machine folds it', async () => {
    for (const [name, id] of Object.entries(ids)) {
      const { rows } = await t.db.pool.query('SELECT status, worker_id, owners, revision FROM baton_read.executions WHERE execution_id = $1', [id]);
      const loaded = await runtime.load(id);
      expect(rows[0], name).toMatchObject({ status: statusOf(loaded.snapshot), revision: String(loaded.revision) });
    }
    const stats = await t.db.pool.query(`SELECT * FROM baton_read.action_stats WHERE action = 'core.echo'`);
    expect(stats.rows[0]).toMatchObject({ requested: '3', running: '1', completed: '1', failed: '1', queued: '0' });
    const workers = await t.db.pool.query(`SELECT * FROM baton_read.workers WHERE worker_id = 'w1'`);
    expect(workers.rows[0]).toMatchObject({ status: 'active', started: '3', completed: '1', failed: '1', capacity: 2 });
    const timeline = await t.db.pool.query('SELECT type FROM baton_read.execution_events WHERE execution_id = $1 ORDER BY revision', [ids.completed]);
    expect(timeline.rows.map((r) => r.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
  });

  it('verify finds the live tables equal to a rebuild, and names every row that is not', async () => {
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
    await t.db.pool.query(`UPDATE baton_read.executions SET status = 'Cancelled' WHERE execution_id = $1`, [ids.running]);
    await t.db.pool.query(`DELETE FROM baton_read.workers WHERE worker_id = 'w1'`);
    const report = await verifyReadModel({ pool: t.db.pool, store: t.store });
    expect(report.ok).toBe(false);
    expect(report.differences).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ table: 'executions', differing: [ids.running], missing: [], extra: [] }),
        expect.objectContaining({ table: 'workers', missing: ['w1'] }),
      ]),
    );
    // The drift sampler sees the tampered execution too: among the newest requested, and when a
    // projector names it among those it changed last (only those are then checked).
    const drift = await sampleExecutionDrift({ pool: t.db.pool, store: t.store, sampleSize: 100 });
    expect(drift.drifted).toEqual([{ executionId: ids.running, fields: ['status'] }]);
    const others = Object.values(ids).filter((id) => id !== ids.running);
    const named = await sampleExecutionDrift({ pool: t.db.pool, store: t.store, sampleSize: 100, recent: [ids.running!, ...others] });
    expect(named).toEqual({ checked: others.length + 1, drifted: [{ executionId: ids.running, fields: ['status'] }] });
    expect(await sampleExecutionDrift({ pool: t.db.pool, store: t.store, sampleSize: 100, recent: others })).toEqual({ checked: others.length, drifted: [] });
  });

  it('rebuild builds aside and swaps in tables equal to the events', async () => {
    const before = await readCheckpoint(t.db.pool, 'executions');
    for (const p of ['executions', 'workers'] as const) {
      const { projections } = await import('../../projections/index.ts');
      await rebuildProjection({ pool: t.db.pool, store: t.store, projection: projections.find((x) => x.name === p)! });
    }
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true });
    const after = await readCheckpoint(t.db.pool, 'executions');
    expect(after.position).toBe(before.position);
    const schemas = await t.db.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'baton_rebuild%' OR nspname LIKE 'baton_verify%'`);
    expect(schemas.rows).toEqual([]);
  });

  it('execution_events copied from the events table in SQL equal the rows the JSON way writes', async () => {
    const events = (await allEvents(t.store)).filter((e) => e.streamId.startsWith(EXECUTION_STREAM_PREFIX));
    expect(events.length).toBeGreaterThan(10);
    const source = eventSourceOf(t.store, t.db.pool);
    expect(source).toBeDefined();
    // Another pool (as EventStoreDB would be): no table to copy from.
    expect(eventSourceOf(t.store, new pg.Pool())).toBeUndefined();
    const tables: Record<string, unknown[]> = {};
    for (const [schema, from] of [['copy_json', undefined], ['copy_sql', source]] as const) {
      await t.db.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
      await inTransaction(t.db.pool, (client) => createProjectionTables(client, schema, executionEventsProjection)); // the table form, keyed
      // Twice, in one transaction as the projector applies: a replayed batch changes nothing either
      // way (the SQL copy's plain INSERT falls back to ON CONFLICT DO NOTHING without aborting it).
      await inTransaction(t.db.pool, async (client) => {
        for (let i = 0; i < 2; i++) await executionEventsProjection.apply(client, schema, events, from);
      });
      tables[schema] = (await t.db.pool.query(`SELECT * FROM ${schema}.execution_events ORDER BY global_position`)).rows;
    }
    // The view of the events that serves the timeline where they share the database (storeView).
    await t.db.pool.query(`DROP SCHEMA IF EXISTS copy_view CASCADE; CREATE SCHEMA copy_view`);
    await inTransaction(t.db.pool, (client) => createProjectionTables(client, 'copy_view', executionEventsProjection, source));
    tables['copy_view'] = (await t.db.pool.query(`SELECT * FROM copy_view.execution_events ORDER BY global_position`)).rows;
    expect(tables['copy_sql']).toHaveLength(events.length);
    expect(tables['copy_sql']).toEqual(tables['copy_json']);
    expect(tables['copy_view']).toEqual(tables['copy_json']);
    // Compared by Postgres too: JS Dates would hide a microsecond apart.
    for (const [a, b] of [['copy_sql', 'copy_json'], ['copy_json', 'copy_sql'], ['copy_view', 'copy_json'], ['copy_json', 'copy_view']]) {
      expect((await t.db.pool.query(`SELECT * FROM ${a}.execution_events EXCEPT ALL SELECT * FROM ${b}.execution_events`)).rows).toEqual([]);
    }
  });

  it('updates a known row with only the columns its events changed, and writes a row gone behind its back whole', async () => {
    const input = { items: Array.from({ length: 200 }, (_, i) => ({ sku: `sku-${i}`, qty: i })) };
    const { executionId } = await runtime.submit({ action: 'core.echo', input, tags: { team: 'a' } });
    await runtime.dispatch(executionId, { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline(), maxAttempts: 1 }, by: 'executor' });
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: { ok: 2 } }, by: 'worker:w1' });
    const [requested, handedOff, started, completed] = await t.store.readStream(`execution-${executionId}`);
    const memory = new Map<string, unknown>(); // one follow's, kept between its batches
    const apply = (events: NonNullable<typeof requested>[]) => inTransaction(t.db.pool, (client) => executionsProjection.apply(client, 'baton_read', events, undefined, memory));
    const row = async () => (await t.db.pool.query('SELECT status, worker_id, revision, input, tags FROM baton_read.executions WHERE execution_id = $1', [executionId])).rows[0];
    try {
      await apply([requested!]);
      expect(await row()).toMatchObject({ status: 'Requested', input, tags: { team: 'a' } });
      // A column the next events do not change, altered behind the projector: left as it is, so
      // the update wrote only what changed (not the input again).
      await t.db.pool.query(`UPDATE baton_read.executions SET input = '{"altered": true}' WHERE execution_id = $1`, [executionId]);
      await apply([handedOff!, started!]);
      expect(await row()).toMatchObject({ status: 'Running', worker_id: 'w1', revision: '2', input: { altered: true }, tags: { team: 'a' } });
      // The row gone behind its back: written whole from the fold again.
      await t.db.pool.query('DELETE FROM baton_read.executions WHERE execution_id = $1', [executionId]);
      await apply([completed!]);
      expect(await row()).toMatchObject({ status: 'Completed', worker_id: 'w1', revision: '3', input, tags: { team: 'a' } });
    } finally {
      await catchUpFully(t.db.pool, t.store);
    }
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true, differences: [] });
  });

  it('applies a batch only from the checkpoint it read: a stale one writes nothing', async () => {
    const { executionId } = await runtime.submit({ action: 'core.noop', input: null });
    const [event] = await t.store.readStream(`execution-${executionId}`);
    const stale = await applyGroupBatch(t.db.pool, [executionsProjection], 0n, [event!]);
    expect(stale).toBeNull();
    const { rowCount } = await t.db.pool.query('SELECT 1 FROM baton_read.executions WHERE execution_id = $1', [executionId]);
    expect(rowCount).toBe(0);
    await catchUpFully(t.db.pool, t.store);
  });

  it('follows live appends, notifies after commit, and rebuilds a projection whose version changed', async () => {
    const listener = new pg.Client({ connectionString: t.db.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(...(n.payload ?? '').split(',')));
    await listener.query(`LISTEN ${EXECUTIONS_CHANGED_CHANNEL}`);
    await t.db.pool.query(`UPDATE baton_projection_checkpoints SET version = 0 WHERE projection = 'workers'`);
    const projector = startProjector({ pool: t.db.pool, store: t.store, log, driftIntervalMs: 0 });
    try {
      const { executionId } = await runtime.submit({ action: 'core.noop', input: { live: true } });
      await until('the row', async () => (await t.db.pool.query('SELECT 1 FROM baton_read.executions WHERE execution_id = $1', [executionId])).rowCount === 1);
      await until('the notification', async () => heard.includes(executionId));
      await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
      await until('the cancellation', async () => (await t.db.pool.query(`SELECT 1 FROM baton_read.executions WHERE execution_id = $1 AND status = 'Cancelled'`, [executionId])).rowCount === 1);
      await until('the workers rebuild', async () => (await readCheckpoint(t.db.pool, 'workers')).version === workersProjection.version);
      await projector.checkDrift();
      expect(projector.problems()).toEqual([]);
    } finally {
      await projector.stop();
      await listener.end();
    }
    expect(await verifyReadModel({ pool: t.db.pool, store: t.store })).toMatchObject({ ok: true });
  });

  it('serves the timeline as a table where the events are elsewhere, and as a view of them where they share its database', async () => {
    const relkind = async () => (await t.db.pool.query(`SELECT relkind FROM pg_class WHERE oid = 'baton_read.execution_events'::regclass`)).rows[0]?.relkind as string;
    const timeline = async () => (await listEvents(t.db.pool, [ids.completed!], { fromRevision: 0, limit: 100, total: 100, valueCap: 1_000_000 })).get(ids.completed!)!;
    const stored = await t.store.readStream(`execution-${ids.completed}`);
    const served = async (store: EventStore) => {
      expect((await timeline()).map((r) => [r.revision, r.type, r.eventId])).toEqual(stored.map((e) => [Number(e.revision), e.type, e.eventId]));
      expect(await verifyReadModel({ pool: t.db.pool, store })).toMatchObject({ ok: true, differences: [] });
    };
    // The events elsewhere (as EventStoreDB would be: another pool here): a table, filled from them.
    const otherPool = new pg.Pool({ connectionString: t.db.url, max: 4 });
    const elsewhere = createPostgresEventStore(otherPool);
    let projector = startProjector({ pool: t.db.pool, store: elsewhere, log, driftIntervalMs: 0 });
    try {
      await until('the table', async () => (await relkind()) === 'r' && (await timeline()).length === stored.length);
      await served(elsewhere);
    } finally {
      await projector.stop();
      await elsewhere.close();
      await otherPool.end();
    }
    // The store on the projector's own pool: that table becomes a view of the events.
    projector = startProjector({ pool: t.db.pool, store: t.store, log, driftIntervalMs: 0 });
    try {
      await until('the view', async () => (await relkind()) === 'v');
      await served(t.store);
      // What retention (or anyone) deletes through the view stays in the store.
      const count = async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n as number;
      const before = await count();
      expect((await t.db.pool.query('DELETE FROM baton_read.execution_events')).rowCount).toBe(0);
      expect(await count()).toBe(before);
    } finally {
      await projector.stop();
    }
  });
});

describe('projector health across a database outage', () => {
  const t = useTestStore({ max: 4 });

  it('is healthy again once the database answers, without waiting for a new event (at a quiet time none comes)', { timeout: 60_000 }, async () => {
    // The projector reaches the database through a relay this test takes down and brings back.
    const relay = await startRelay(new URL(t.db.url), 5432);
    const pool = new pg.Pool({ connectionString: relay.url, max: 4, connectionTimeoutMillis: 1_000 });
    onLostConnections(pool, () => undefined); // as openDatabase's pool does: idle or checked out
    const store = createPostgresEventStore(pool);
    const projector = startProjector({ pool, store, log, driftIntervalMs: 0 });
    try {
      await createExecutionRuntime(t.store).submit({ action: 'core.noop' });
      await until('the projector to follow', async () => (await readCheckpoint(t.db.pool, 'executions')).position > 0n);
      expect(projector.problems()).toEqual([]);
      // The database goes away: refused, and every open connection cut.
      await relay.down();
      await until('the outage to show', async () => projector.problems().length > 0, 20_000);
      // Back, and nothing new is appended: the projector says it is healthy again all the same.
      await relay.reopen();
      await until('the problems to clear', async () => projector.problems().length === 0, 20_000);
    } finally {
      await projector.stop();
      await store.close();
      await pool.end().catch(() => undefined);
      await relay.close();
    }
  });

  it('is healthy again after its database refused connections for a while (ALLOW_CONNECTIONS false: SQLSTATE 55000)', { timeout: 60_000 }, async () => {
    const pool = new pg.Pool({ connectionString: t.db.url, max: 4, connectionTimeoutMillis: 1_000 });
    onLostConnections(pool, () => undefined); // as openDatabase's pool does: idle or checked out
    const store = createPostgresEventStore(pool);
    const projector = startProjector({ pool, store, log, driftIntervalMs: 0 });
    const name = new URL(t.db.url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: Object.assign(new URL(t.db.url), { pathname: '/postgres' }).toString() });
    await admin.connect();
    try {
      await createExecutionRuntime(t.store).submit({ action: 'core.noop' });
      await until('the projector to follow', async () => (await readCheckpoint(t.db.pool, 'executions')).position > 0n);
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      // The projector's connections only: the test harness's own pool has no error listener.
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name <> 'baton-test-harness'", [name]);
      await until('the outage to show', async () => projector.problems().some((p) => /not currently accepting connections/.test(p)), 20_000);
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
      await until('the problems to clear', async () => projector.problems().length === 0, 20_000);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`).catch(() => undefined);
      await admin.end();
      await projector.stop();
      await store.close();
      await pool.end().catch(() => undefined);
    }
  });
});
