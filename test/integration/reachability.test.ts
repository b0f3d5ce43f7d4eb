// A host's /healthz names what it cannot reach (src/process/reachability.ts): the database, from a
// probe every few seconds, and NATS, from its connection's status. Against a real database, a
// port where none listens, and a private nats-server stopped and started again.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { watchReachability } from '../../src/process/reachability.ts';
import { connectNats } from '../../src/transport/nats/connect.ts';
import { PrivateNats } from '../faults/private-nats.ts';
import { freePort } from '../support/free-port.ts';
import { createTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

describe('reachability', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  });

  /** A private nats-server, a connection to it (its options), a test database, and reachability watching both (its options). */
  async function watchingPrivateNats(connect: Parameters<typeof connectNats>[2] = {}, watch: { intervalMs: number; timeoutMs?: number }) {
    const nats = await PrivateNats.start();
    cleanups.push(() => nats.destroy());
    const nc = await connectNats(nats.url, undefined, connect);
    cleanups.push(() => nc.close());
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const r = watchReachability({ pool: db.pool, nc, ...watch });
    cleanups.push(async () => r.stop());
    return { nats, nc, r };
  }

  it('names a database that does not answer; one that answers has nothing to say', async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const reachable = watchReachability({ pool: db.pool, intervalMs: 50 });
    const gone = new pg.Pool({ connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/nowhere`, connectionTimeoutMillis: 1_000 });
    gone.on('error', () => undefined);
    cleanups.push(() => gone.end());
    const unreachable = watchReachability({ pool: gone, intervalMs: 50 });
    cleanups.push(async () => (reachable.stop(), unreachable.stop()));
    await until('a failed probe', () => unreachable.problems().length > 0, 10_000);
    expect(unreachable.problems()).toEqual([expect.stringMatching(/^the database is unreachable since \d{4}-\d\d-\d\dT.*Z: .*ECONNREFUSED/)]);
    await new Promise((r) => setTimeout(r, 200)); // several probes of the reachable one
    expect(reachable.problems()).toEqual([]);
  });

  it('names a NATS connection that is down while it reconnects, and clears once it is back', { timeout: 60_000 }, async () => {
    const { nats, r } = await watchingPrivateNats({}, { intervalMs: 50 });
    expect(r.problems()).toEqual([]);
    await nats.stop();
    await until('the disconnect to show', () => r.problems().length > 0, 20_000);
    expect(r.problems()).toEqual([expect.stringMatching(/^NATS is disconnected since .*\(reconnecting\)$/)]);
    await nats.start();
    await until('the reconnect to clear it', () => r.problems().length === 0, 30_000);
  });

  it('names a NATS server that stops answering while its connection stays open, and clears once it answers', { timeout: 60_000 }, async () => {
    const { nats, r } = await watchingPrivateNats({}, { intervalMs: 50, timeoutMs: 300 });
    await new Promise((resolve) => setTimeout(resolve, 300)); // several answered probes
    expect(r.problems()).toEqual([]);
    nats.freeze();
    await until('the silence to show', () => r.problems().length > 0, 20_000);
    expect(r.problems()).toEqual([expect.stringMatching(/^NATS does not answer since \d{4}-.*Z: no answer within 300 ms$/)]);
    nats.thaw();
    await until('an answer to clear it', () => r.problems().length === 0, 20_000);
  });

  it('drops and reconnects a connection whose server stops answering, once its pings run out', { timeout: 60_000 }, async () => {
    const { nats, nc, r } = await watchingPrivateNats({ pingIntervalMs: 300 }, { intervalMs: 60_000 }); // the status events alone
    nats.freeze();
    await until('the stale connection to be dropped', () => r.problems().length > 0, 20_000);
    expect(r.problems()).toEqual([expect.stringMatching(/^NATS is disconnected since .*\(reconnecting\)$/)]);
    nats.thaw();
    await until('the reconnect to clear it', () => r.problems().length === 0, 30_000);
    await nc.flush();
  });
});
