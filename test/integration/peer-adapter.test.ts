// Baton's adapter for the shared peer benchmark (src/bench/peer-adapter.ts), driven as the
// harness drives it: setup (which starts the projector in a process of its own), enqueue, start a
// worker, see every handler called, then nothing pending. With a harness knob (BATON_DIR) in the environment,
// which `baton projector` would refuse as an unknown variable if it were passed on.
import { connect } from 'nats';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { create } from '../../src/bench/peer-adapter.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const natsUrl = inject('natsUrl');

describe.each(['postgres', ...(natsUrl ? ['nats'] : [])])('bench-peers adapter (%s)', (variant) => {
  let db: TestDatabase;
  const saved = { BATON_DIR: process.env.BATON_DIR, NATS_URL: process.env.NATS_URL };

  beforeAll(async () => {
    db = await createTestDatabase();
    process.env.BATON_DIR = '/path/to/a/checkout';
    if (natsUrl) process.env.NATS_URL = natsUrl;
  });
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await db?.drop();
  });

  it('runs every enqueued job once and then shows nothing pending, phase after phase', async () => {
    const adapter = await create({ pgUrl: db.url, variant });
    try {
      await adapter.setup();
      // Two phases with a clear() between, as the harness runs them: the second starts from nothing.
      for (const jobs of [41, 23]) {
        await adapter.clear();
        await adapter.enqueueMany(Array.from({ length: jobs - 1 }, (_, i) => ({ i })));
        await adapter.enqueueOne({ i: jobs - 1 });
        expect(await adapter.pending()).toBe(jobs);
        const seen = new Set<number>();
        let calls = 0;
        const worker = await adapter.startWorker({ concurrency: 8, handler: async (p) => void (calls++, seen.add((p as { i: number }).i)) });
        const deadline = Date.now() + 30_000;
        const projected = async () => Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM baton_read.executions WHERE status = 'Completed'`)).rows[0]!.n);
        // Drained, and the projector (its own process) has the phase's executions, and only those.
        while ((await adapter.pending()) > 0 || (await projected()) !== jobs) {
          if (Date.now() > deadline) throw new Error(`after 30 s: ${await adapter.pending()} pending, ${await projected()} of ${jobs} projected (${calls} handler calls)`);
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(seen.size).toBe(jobs);
        expect(calls).toBe(jobs);
        await worker.stop();
      }
    } finally {
      await adapter.close();
    }
    await adapter.close(); // a second close is harmless
    if (variant === 'nats') {
      // Its streams are gone with it: runs leave nothing on the server.
      const nc = await connect({ servers: natsUrl! });
      try {
        const jsm = await nc.jetstreamManager();
        const names: string[] = [];
        for await (const s of jsm.streams.list()) names.push(s.config.name);
        expect(names.filter((n) => n.startsWith(`BATON_PEERS_${new URL(db.url).pathname.slice(1)}`))).toEqual([]);
      } finally {
        await nc.close();
      }
    }
  }, 60_000);

  it('closes cleanly after a setup that failed, and refuses a bad pool size in one line', async () => {
    const saved = process.env.NATS_URL;
    process.env.NATS_URL = 'nats://127.0.0.1:1'; // nothing listens there
    try {
      const adapter = await create({ pgUrl: db.url, variant });
      if (variant === 'nats') await expect(adapter.setup()).rejects.toThrow(/cannot connect to NATS at nats:\/\/127\.0\.0\.1:1 \(NATS_URL, as the harness sets it\)/);
      await adapter.close(); // the pools end, nothing is thrown for a server never reached
    } finally {
      process.env.NATS_URL = saved;
    }
    process.env.BATON_SUBMIT_POOL = '-1';
    try {
      await expect(create({ pgUrl: db.url, variant })).rejects.toThrow(/^baton peer adapter: BATON_SUBMIT_POOL=-1: Invalid number of connections: expected a whole number from 1 to 1000$/);
    } finally {
      delete process.env.BATON_SUBMIT_POOL;
    }
    process.env.BATON_EAGER_DISPATCH = 'maybe';
    try {
      await expect(create({ pgUrl: db.url, variant })).rejects.toThrow(/^baton peer adapter: BATON_EAGER_DISPATCH=maybe: Invalid switch: expected on or off$/);
    } finally {
      delete process.env.BATON_EAGER_DISPATCH;
    }
    await expect(create({ pgUrl: 'not a url', variant })).rejects.toThrow(/^baton peer adapter: cfg\.pgUrl must be a postgres:\/\/ URL \(got "not a url"\)$/);
  });
});
