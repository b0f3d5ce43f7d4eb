// Baton's adapter for the shared peer benchmark (src/bench/peer-adapter.ts), driven as the
// harness drives it: enqueue, start a worker (the projector in a process of its own), see every
// handler called, then nothing pending. With a harness knob (BATON_DIR) in the environment,
// which `baton projector` would refuse as an unknown variable if it were passed on.
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

  it('runs every enqueued job once and then shows nothing pending', async () => {
    const adapter = await create({ pgUrl: db.url, variant });
    try {
      await adapter.setup();
      await adapter.clear();
      await adapter.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ i })));
      await adapter.enqueueOne({ i: 40 });
      expect(await adapter.pending()).toBe(41);
      const seen = new Set<number>();
      let calls = 0;
      const worker = await adapter.startWorker({ concurrency: 8, handler: async (p) => void (calls++, seen.add((p as { i: number }).i)) });
      const deadline = Date.now() + 30_000;
      while ((await adapter.pending()) > 0) {
        if (Date.now() > deadline) throw new Error(`still ${await adapter.pending()} pending after 30 s (${calls} handler calls)`);
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(seen.size).toBe(41);
      expect(calls).toBe(41);
      await worker.stop();
    } finally {
      await adapter.close();
    }
  }, 60_000);
});
