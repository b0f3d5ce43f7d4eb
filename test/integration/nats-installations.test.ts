// Two installations (two databases) on one NATS server: each has its own stream, subjects and
// consumers, derived from its database, so a worker id both use never takes the other's work; a
// copy of a database (CREATE DATABASE … TEMPLATE, as a restored dump) is an installation of its own.
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
