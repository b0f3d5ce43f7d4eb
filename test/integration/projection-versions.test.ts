// The read model against a newer Baton's, and verify's reports, on a real Postgres: a projector
// never rebuilds a newer version down (nor folds into it), verify says how far behind the store
// the read model is and which columns differ, scratch schemas of dead runs are swept, and a
// rebuild that waited for another one does not do it all again.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { executionEventsProjection } from '../../projections/execution-events.ts';
import { workersProjection } from '../../projections/workers.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { NewerVersionError, readCheckpoint } from '../../src/readmodel/checkpoints.ts';
import { startProjector } from '../../src/readmodel/projector-host.ts';
import { rebuildProjection } from '../../src/readmodel/rebuild.ts';
import { holdScratchSchema, interruptCleanup } from '../../src/readmodel/scratch.ts';
import { verifyReadModel } from '../../src/readmodel/verify.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const log = pino({ level: 'silent' });

describe('projection versions, verify reports and scratch schemas', () => {
  const t = useTestStore({ max: 12 });

  const startWorker = (id: string) =>
    t.store.append(workerStreamId(id), [{ eventId: randomUUID(), type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 1 }, metadata: { by: `worker:${id}`, occurredAt: new Date().toISOString() } }], { expectedRevision: 'no_stream' });
  const workersVersion = async () => (await readCheckpoint(t.db.pool, 'workers')).version;

  it('a projector leaves a projection built by a newer version alone, and a running one notices the swap', async () => {
    await startWorker(`w-${randomUUID()}`);
    const projector = startProjector({ pool: t.db.pool, store: t.store, log, driftIntervalMs: 0, standByRecheckMs: 200 });
    try {
      await until('caught up', async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM baton_read.workers')).rows[0].n === 1);
      // A newer projector's rebuild swaps in its version under this running one.
      const newer = workersProjection.version + 3;
      await t.db.pool.query('UPDATE baton_projection_checkpoints SET version = $1 WHERE projection = $2', [newer, 'workers']);
      const before = await readCheckpoint(t.db.pool, 'workers');
      await startWorker(`w-${randomUUID()}`);
      await until('the projector to stand by', async () => projector.problems().some((m) => m.includes('built by a newer Baton')), 10_000, { detail: () => projector.problems().join('\n') });
      expect(projector.problems()).toEqual([`projection workers is at version ${newer}, built by a newer Baton; this projector (version ${workersProjection.version}) leaves it alone: upgrade it`]);
      // Neither folded into with this code nor rebuilt down, across several re-checks.
      await new Promise((r) => setTimeout(r, 700)); // three re-check periods: nothing to await, we check nothing happens
      const after = await readCheckpoint(t.db.pool, 'workers');
      expect({ version: after.version, position: after.position }).toEqual({ version: newer, position: before.position });
      // Rolled back to this version (say, the newer one was withdrawn): it takes it up again.
      await t.db.pool.query('UPDATE baton_projection_checkpoints SET version = $1 WHERE projection = $2', [workersProjection.version, 'workers']);
      await until('it follows again', async () => (await t.db.pool.query('SELECT count(*)::int AS n FROM baton_read.workers')).rows[0].n === 2 && projector.problems().length === 0);
    } finally {
      await projector.stop();
    }
  });

  it('`projections rebuild` refuses to rebuild a newer version down', async () => {
    const newer = workersProjection.version + 1;
    await t.db.pool.query('UPDATE baton_projection_checkpoints SET version = $1 WHERE projection = $2', [newer, 'workers']);
    try {
      await expect(rebuildProjection({ pool: t.db.pool, store: t.store, projection: workersProjection })).rejects.toThrow(NewerVersionError);
      expect(await workersVersion()).toBe(newer);
      const report = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
      expect(report.projections[0]!.problem).toMatch(/newer than this build/);
    } finally {
      await t.db.pool.query('UPDATE baton_projection_checkpoints SET version = $1 WHERE projection = $2', [workersProjection.version, 'workers']);
    }
  });

  it('verify reports its rebuild\'s progress counting on across projections, never back from 0', async () => {
    await startWorker(`w-${randomUUID()}`);
    await catchUpFully(t.db.pool, t.store);
    const seen: { projection: string; events: number }[] = [];
    const report = await verifyReadModel({ pool: t.db.pool, store: t.store, batchSize: 1, onProgress: (p) => seen.push(p) });
    expect(new Set(seen.map((p) => p.projection)).size).toBeGreaterThan(1);
    expect(seen.map((p) => p.events)).toEqual([...seen.map((p) => p.events)].sort((a, b) => a - b));
    expect(seen.at(-1)!.events).toBeLessThanOrEqual(report.projections.reduce((n, p) => n + p.events, 0));
  });

  it('verify says how far behind the store the read model is, and fails when it has been behind for long', async () => {
    await catchUpFully(t.db.pool, t.store);
    const ok = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
    expect(ok).toMatchObject({ ok: true });
    expect(ok.projections[0]!.behind).toBeUndefined();
    const ids = [randomUUID(), randomUUID()];
    for (const id of ids) await startWorker(id);
    await t.store.settled();
    const fresh = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
    expect(fresh.ok).toBe(true); // merely behind: not wrong
    expect(fresh.projections[0]!.behind).toMatchObject({ events: 2 });
    // Stored five minutes ago and still not applied: nobody keeps it current.
    await t.db.pool.query(`UPDATE baton_events SET recorded_at = recorded_at - interval '5 minutes' WHERE stream_id = ANY($1::text[])`, [ids.map(workerStreamId)]);
    const stale = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
    expect(stale.ok).toBe(false);
    expect(stale.projections[0]!.problem).toMatch(/2 event\(s\) behind the store, the oldest stored 5\.\d min ago: not wrong, but not kept current/);
    await catchUpFully(t.db.pool, t.store);
  });

  it("verify counts the timeline's rows at the position it verified, not the events stored since", async () => {
    const runtime = createExecutionRuntime(t.store);
    await runtime.submit({ action: 'core.noop' });
    await catchUpFully(t.db.pool, t.store);
    const at = await readCheckpoint(t.db.pool, 'execution_events');
    await runtime.submit({ action: 'core.noop' }); // stored, not projected
    await t.store.settled(); // readable to the store's readers (another transaction on the server may hold it back a moment)
    const report = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [executionEventsProjection] });
    const { rows } = await t.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM baton_events WHERE stream_id LIKE $1 AND global_position <= $2', ['execution-%', String(at.position)]);
    expect(report.projections[0]).toMatchObject({ position: String(at.position), rows: { execution_events: rows[0]!.n }, behind: { events: 1 } });
    await catchUpFully(t.db.pool, t.store);
  });

  it('Ctrl-C drops the scratch schema in use, ending the sessions that hold it', async () => {
    const held = await holdScratchSchema(t.db.pool, 'baton_verify_c7c7c7c7');
    const busy = await t.db.pool.connect();
    busy.on('error', () => undefined); // ended by the cleanup, as it should be
    try {
      await busy.query('BEGIN');
      await busy.query('CREATE TABLE baton_verify_c7c7c7c7.rows (x int)');
      const stuck = busy.query('SELECT pg_sleep(30)').catch((err: Error) => err.message);
      expect(await interruptCleanup(t.db.url)).toEqual({ dropped: ['baton_verify_c7c7c7c7'], left: [] });
      expect(await stuck).toMatch(/terminating connection/);
      expect((await t.db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'baton_verify_c7c7c7c7'`)).rowCount).toBe(0);
    } finally {
      await busy.query('ROLLBACK').catch(() => undefined);
      busy.release(true);
      await held.release();
    }
  });

  it('verify names the columns that differ', async () => {
    await catchUpFully(t.db.pool, t.store);
    const { rows } = await t.db.pool.query<{ worker_id: string }>('SELECT worker_id FROM baton_read.workers ORDER BY worker_id LIMIT 1');
    const id = rows[0]!.worker_id;
    await t.db.pool.query(`UPDATE baton_read.workers SET status = 'Stopped' WHERE worker_id = $1`, [id]);
    try {
      const report = await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
      expect(report.ok).toBe(false);
      expect(report.differences[0]).toMatchObject({ table: 'workers', differing: [id], columns: { [id]: ['status'] } });
    } finally {
      await rebuildProjection({ pool: t.db.pool, store: t.store, projection: workersProjection });
    }
  });

  it('verify sweeps scratch schemas of dead runs, and leaves one a live run holds', async () => {
    const dead = 'baton_verify_dead0001';
    const live = 'baton_verify_a11ce002';
    await t.db.pool.query(`CREATE SCHEMA ${dead}; CREATE TABLE ${dead}.workers (x int); CREATE SCHEMA ${live}`);
    const holder = new pg.Client({ connectionString: t.db.url });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [live]);
      await verifyReadModel({ pool: t.db.pool, store: t.store, projections: [workersProjection] });
      const left = (await t.db.pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'baton\\_verify\\_%' ORDER BY 1`)).rows.map((r) => r.nspname);
      expect(left).toEqual([live]);
    } finally {
      await holder.end();
      await t.db.pool.query(`DROP SCHEMA IF EXISTS ${live}`);
    }
  });

  it('a rebuild that waited for another one says so, and does not do it again', async () => {
    let waited = false;
    let release = () => {};
    const gate = new Promise<void>((r) => (release = r));
    let started = () => {};
    const first = new Promise<void>((r) => (started = r));
    const one = rebuildProjection({ pool: t.db.pool, store: t.store, projection: workersProjection, onStart: async () => (started(), await gate) });
    await first;
    const two = rebuildProjection({ pool: t.db.pool, store: t.store, projection: workersProjection, onWait: () => ((waited = true), release()) });
    const [a, b] = await Promise.all([one, two]);
    expect(waited).toBe(true);
    expect(a.skipped).toBeUndefined();
    expect(b.skipped).toMatch(/another rebuild of workers finished while this one waited/);
  });
});
