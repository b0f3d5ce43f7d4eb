// Two installations (two databases) on one NATS server: each has its own stream, subjects and
// consumers, derived from its database, so a worker id both use never takes the other's work; a
// copy of a database (CREATE DATABASE … TEMPLATE, as a restored dump) is an installation of its own,
// and so is a copied embedded data dir (same database name, another cluster directory).
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { natsNamesOf } from '../../src/transport/nats/installation-names.ts';
import type { Delivery, WorkTransport } from '../../src/transport/work-transport.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const natsUrl = inject('natsUrl');

describe.skipIf(!natsUrl)('installations sharing a NATS server', () => {
  let a: TestDatabase;
  let b: TestDatabase;
  let nc: NatsConnection;
  const names: { streamName: string; subjectPrefix: string }[] = [];
  beforeAll(async () => {
    [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    nc = await connect({ servers: natsUrl! });
  });
  afterAll(async () => {
    for (const n of names) await deleteNatsWorkStreams(nc, n);
    await nc?.close();
    await Promise.all([a?.drop(), b?.drop()]);
  });

  it('each database names its own stream and subjects, the same for every process of it, and copies of one template differ', async () => {
    const [na, nb, again] = [await natsNamesOf(a.pool), await natsNamesOf(b.pool), await natsNamesOf(a.pool)];
    expect(na.streamName).toMatch(/^BATON_WORK_[0-9a-f]{12}$/);
    expect(na.subjectPrefix).toMatch(/^baton\.[0-9a-f]{12}$/);
    expect(again).toEqual(na);
    expect(nb.streamName).not.toBe(na.streamName);
    expect(nb.subjectPrefix).not.toBe(na.subjectPrefix);
  });

  it('a copy asked by two processes at once gives both the same names (the one that waited on the other reads what it wrote)', async () => {
    const c = await createTestDatabase(); // a fresh copy: it still holds the template's id
    const first = await c.pool.connect();
    try {
      // The first asker's UPDATE, held open: the second must wait on the row, then see its id.
      await first.query('BEGIN');
      const { rows } = await first.query<{ id: string }>(
        'UPDATE baton_installation SET id = gen_random_uuid(), database_name = current_database() WHERE database_name IS DISTINCT FROM current_database() RETURNING id::text AS id',
      );
      expect(rows).toHaveLength(1);
      const second = natsNamesOf(c.pool);
      const end = Date.now() + 10_000;
      const waiting = async () => (await c.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows[0].n > 0;
      while (!(await waiting())) {
        if (Date.now() > end) throw new Error('the second asker never waited on the first');
        await new Promise((r) => setTimeout(r, 10));
      }
      await first.query('COMMIT');
      expect((await second).streamName).toBe(`BATON_WORK_${rows[0]!.id.replace(/-/g, '').slice(0, 12)}`);
    } finally {
      first.release();
      await c.drop();
    }
  });

  it('on the embedded default, a copied or moved cluster directory is another installation; a process on the URL keeps the id', async () => {
    // Every embedded database is named `baton`: a copied data dir (`cp -a devB/.baton devC/`) holds
    // the original's row under the same database name. Only the cluster's directory tells them apart.
    const c = await createTestDatabase();
    try {
      const devB = await natsNamesOf(c.pool, '/projects/devB/.baton/postgres');
      expect(await natsNamesOf(c.pool, '/projects/devB/.baton/postgres')).toEqual(devB); // every process of it agrees
      const devC = await natsNamesOf(c.pool, '/projects/devC/.baton/postgres');
      expect(devC.streamName).not.toBe(devB.streamName);
      expect(devC.subjectPrefix).not.toBe(devB.subjectPrefix);
      expect((await c.pool.query('SELECT data_dir FROM baton_installation')).rows).toEqual([{ data_dir: '/projects/devC/.baton/postgres' }]);
      // A library process reaching that server by its URL knows no data dir: it must not re-key it.
      expect(await natsNamesOf(c.pool)).toEqual(devC);
      expect(await natsNamesOf(c.pool, '/projects/devC/.baton/postgres')).toEqual(devC);
    } finally {
      await c.drop();
    }
  });

  it('a worker id both installations use receives only its own installation\'s work', async () => {
    const [na, nb] = [await natsNamesOf(a.pool), await natsNamesOf(b.pool)];
    names.push(na, nb);
    const ta: WorkTransport = await createNatsWorkTransport(nc, na);
    const tb: WorkTransport = await createNatsWorkTransport(nc, nb);
    const got: Record<'a' | 'b', string[]> = { a: [], b: [] };
    const on = (k: 'a' | 'b') => async (d: Delivery) => {
      got[k].push(d.message.executionId);
      await d.ack();
    };
    const [ca, cb] = [await ta.consume('same-worker', on('a'), { concurrency: 1 }), await tb.consume('same-worker', on('b'), { concurrency: 1 })];
    const message = (executionId: string) => ({ messageId: crypto.randomUUID(), executionId, workerId: 'same-worker', runtime: 'node', action: 'core.noop', attempt: 1, handoffRevision: '1', publishedAt: new Date().toISOString() });
    await ta.publish([message('for-a')]);
    await tb.publish([message('for-b')]);
    const end = Date.now() + 10_000;
    while ((got.a.length < 1 || got.b.length < 1) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200)); // a stray delivery would have arrived by now
    expect(got).toEqual({ a: ['for-a'], b: ['for-b'] });
    await ca.stop();
    await cb.stop();
    await ta.close();
    await tb.close();
  });
});
