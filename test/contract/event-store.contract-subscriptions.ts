// The EventStore contract's subscription tests: catch-up and live delivery in commit and stream
// order, resuming, aborting, and transactions that commit out of order.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { START, type StoredEvent, type SubscriptionResume } from '../../src/eventstore/event-store.ts';
import type { EventStoreSuite } from './event-store.contract.ts';
import { collect, events, newEvent, readAllDeliverable, uniqueStream } from './event-store.fixtures.ts';

export function subscriptionTests(suite: EventStoreSuite): void {
  const { name, capabilities } = suite;

  it('subscribes: catches up, then delivers live appends in order, and reports latency', async () => {
    const { store } = suite;
    const prefix = `sub${randomUUID().slice(0, 8)}`;
    const s = uniqueStream(prefix);
    await store.append(s, events(3), { expectedRevision: 'no_stream' });
    const ac = new AbortController();
    const received: { event: StoredEvent; at: number }[] = [];
    let notify: (() => void) | undefined;
    const consumer = (async () => {
      for await (const event of store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal })) {
        received.push({ event, at: performance.now() });
        notify?.();
      }
    })();
    const next = (count: number) =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`subscription delivered ${received.length}/${count} events in 5s`)), 5000);
        notify = () => {
          if (received.length >= count) {
            clearTimeout(t);
            resolve();
          }
        };
        notify();
      });
    await next(3);
    const latencies: number[] = [];
    for (let i = 0; i < 50; i++) {
      const t0 = performance.now();
      await store.append(s, [newEvent('Live', { i })], { expectedRevision: BigInt(2 + i) });
      await next(4 + i);
      latencies.push(received[received.length - 1]!.at - t0);
    }
    ac.abort();
    await consumer;
    expect(received.map((r) => r.event.revision)).toEqual(Array.from({ length: 53 }, (_, i) => BigInt(i)));
    latencies.sort((x, y) => x - y);
    const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!.toFixed(2);
    console.log(`[${name}] subscription latency, append start -> delivery (50 sequential appends): p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms, max ${pct(1)} ms`);
    // A sanity bound, not a benchmark: delivery must be pushed, not left to a slow poll.
    expect(latencies[Math.floor(latencies.length / 2)]!).toBeLessThan(250);
  });

  it('a narrow subscription passes over many other streams’ events in small batches', async () => {
    const { store } = suite;
    const prefix = `narrow${randomUUID().slice(0, 8)}`;
    const noise = uniqueStream('noise');
    await store.append(noise, events(120), { expectedRevision: 'no_stream' });
    const target = uniqueStream(prefix);
    await store.append(target, events(2), { expectedRevision: 'no_stream' });
    const ac = new AbortController();
    const seen: StoredEvent[] = [];
    const timer = setTimeout(() => ac.abort(), 5000);
    for await (const e of store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal, batchSize: 7 })) {
      seen.push(e);
      if (seen.length === 2) break;
    }
    clearTimeout(timer);
    ac.abort();
    expect(seen.map((e) => [e.streamId, e.revision])).toEqual([[target, 0n], [target, 1n]]);
  });

  it('subscribes in stream order: every event once, each stream in revision order, live appends from many writers', async () => {
    const { store } = suite;
    const prefix = `so${randomUUID().slice(0, 8)}`;
    const streams = Array.from({ length: 8 }, () => uniqueStream(prefix));
    await store.append(streams[0]!, events(3), { expectedRevision: 'no_stream' });
    const seen = collect(store, START, [prefix], (got) => got.length >= 3 + 8 * 4, 8000, 'stream');
    await Promise.all(
      streams.map(async (s, i) => {
        let at: bigint | 'no_stream' = i === 0 ? 2n : 'no_stream';
        for (let k = 0; k < 4; k++) at = (await store.append(s, events(1), { expectedRevision: at })).nextExpectedRevision;
      }),
    );
    const got = await seen;
    expect(new Set(got.map((e) => e.eventId)).size).toBe(got.length);
    for (const s of streams) {
      const revisions = got.filter((e) => e.streamId === s).map((e) => e.revision);
      expect(revisions).toEqual(revisions.map((_, i) => BigInt(i)));
    }
    expect(got.length).toBe(3 + 8 * 4);
  });

  it('delivers in stream order and in commit order each event as readStream and readAll give it: data, metadata and time', async () => {
    const { store } = suite;
    const prefix = `sd${randomUUID().slice(0, 8)}`;
    const s = uniqueStream(prefix);
    const written = [
      { eventId: randomUUID(), type: 'Nested', data: { list: [1, 'two', { three: null }], text: 'üñí\u00e9 "quoted"', n: 1.5 }, metadata: { by: 'executor', occurredAt: '2026-01-01T00:00:00.000Z' } },
      { eventId: randomUUID(), type: 'Scalar', data: 'just a string', metadata: { by: 'worker:w1' } },
    ];
    await store.append(s, written, { expectedRevision: 'no_stream' });
    const followed = await collect(store, START, [prefix], (got) => got.length >= 2, 5000, 'stream');
    const plain = (e: StoredEvent) => ({ eventId: e.eventId, streamId: e.streamId, revision: e.revision, globalPosition: e.globalPosition, type: e.type, data: e.data, metadata: e.metadata, recordedAt: e.recordedAt });
    expect(followed.map(plain)).toEqual((await store.readStream(s)).map(plain));
    // readAll and commit order hold events back while an older transaction anywhere on the server
    // is open (another test file's, when they run side by side): wait until it has ended.
    await store.settled?.();
    const inCommitOrder = await collect(store, START, [prefix], (got) => got.length >= 2, 5000, 'global');
    expect(followed.map(plain)).toEqual((await store.readAll({ after: START, limit: 10, streamPrefixes: [prefix] })).map(plain));
    expect(inCommitOrder.map(plain)).toEqual(followed.map(plain));
    expect(followed.map((e) => e.data)).toEqual(written.map((w) => w.data));
    expect(inCommitOrder[1]!.recordedAt).toBeInstanceOf(Date);
    expect(followed[0]!.recordedAt).toBeInstanceOf(Date);
  });

  it('resumes a stream-order subscription exactly where the last batch handled ended', async () => {
    const { store } = suite;
    const prefix = `sr${randomUUID().slice(0, 8)}`;
    const s = uniqueStream(prefix);
    await store.append(s, events(3), { expectedRevision: 'no_stream' });
    const resume: SubscriptionResume = {};
    const ac = new AbortController();
    const first: StoredEvent[] = [];
    const iterator = store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac.signal, order: 'stream', resume, batchSize: 2 })[Symbol.asyncIterator]();
    for (let i = 0; i < 3; i++) first.push((await iterator.next()).value as StoredEvent);
    // The first batch (2 events) was handled when the third was asked for; the second batch was not finished.
    await iterator.return?.();
    await store.append(s, events(1), { expectedRevision: 2n });
    const again = await collect(store, START, [prefix], (got) => got.length >= 2, 5000, 'stream');
    expect(again.length).toBe(2); // without resume: from the start
    const resumed: StoredEvent[] = [];
    const ac2 = new AbortController();
    const timer = setTimeout(() => ac2.abort(), 5000);
    for await (const e of store.subscribe({ after: START, streamPrefixes: [prefix], signal: ac2.signal, order: 'stream', resume })) {
      resumed.push(e);
      if (resumed.length === 2) break;
    }
    clearTimeout(timer);
    ac.abort();
    ac2.abort();
    expect(first.map((e) => e.revision)).toEqual([0n, 1n, 2n]);
    expect(resumed.map((e) => e.revision)).toEqual([2n, 3n]);
  });

  it('ends a subscription promptly when its signal aborts', async () => {
    const { store } = suite;
    const ac = new AbortController();
    const done = (async () => {
      for await (const _ of store.subscribe({ after: START, streamPrefixes: [`none-${randomUUID()}`], signal: ac.signal })) void _;
    })();
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    ac.abort();
    await done;
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  // Skipped only for adapters whose server orders commits itself (EventStoreDB).
  describe.skipIf(!capabilities.openTransactions)(`transactions committing out of order${capabilities.openTransactions ? '' : ' (skipped: the server serialises commits)'}`, () => {
    for (const firstCommitted of ['earlier-started', 'later-started'] as const) {
      it(`delivers both, in order, exactly once (${firstCommitted} commits first)`, async () => {
        const { h, store } = suite;
        if (!h.openAppend) throw new Error(`${name}: openTransactions is set but the harness has no openAppend`);
        const prefix = `ooo${randomUUID().slice(0, 8)}`;
        const [x, y] = [uniqueStream(prefix), uniqueStream(prefix)];
        const seen = collect(store, START, [prefix], (got) => got.length >= 2, 8000);
        const first = await h.openAppend(x, [newEvent('X')], 'no_stream');
        const second = await h.openAppend(y, [newEvent('Y')], 'no_stream');
        const [commitFirst, commitLast] = firstCommitted === 'later-started' ? [second, first] : [first, second];
        await commitFirst.commit();
        await new Promise((r) => setTimeout(r, 150)); // let the subscriber poll while one is still open
        await commitLast.commit();
        const got = await seen;
        expect(got.map((e) => e.streamId).sort()).toEqual([x, y].sort());
        // Nothing more arrives: exactly once.
        const after = await store.readAll({ after: got[1]!.globalPosition, limit: 10, streamPrefixes: [prefix] });
        expect(after).toEqual([]);
        const replay = await readAllDeliverable(store, prefix, 2);
        expect(replay.map((e) => e.eventId)).toEqual(got.map((e) => e.eventId));
      });
    }

    it('stream order delivers what committed while an older transaction is still open, and the open one’s events once it commits, each once', async () => {
      const { h, store } = suite;
      if (!h.openAppend) throw new Error(`${name}: openTransactions is set but the harness has no openAppend`);
      const prefix = `sh${randomUUID().slice(0, 8)}`;
      const [held, free] = [uniqueStream(prefix), uniqueStream(prefix)];
      const inOrder = collect(store, START, [prefix], (got) => got.length >= 3, 8000, 'global');
      const arrivals: string[] = [];
      const streamOrder = collect(store, START, [prefix], (got) => (arrivals.push(got[got.length - 1]!.streamId), got.length >= 3), 8000, 'stream');
      const open = await h.openAppend(held, [newEvent('Held')], 'no_stream');
      await store.append(free, [newEvent('Free'), newEvent('Free')], { expectedRevision: 'no_stream' });
      // The stream-order subscriber gets `free` while `held` is open; the global one cannot.
      const deadline = Date.now() + 5000;
      while (arrivals.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(arrivals).toEqual([free, free]);
      await open.commit();
      const [global, stream] = await Promise.all([inOrder, streamOrder]);
      expect(global.map((e) => e.type)).toEqual(['Held', 'Free', 'Free']);
      expect(stream.map((e) => e.type)).toEqual(['Free', 'Free', 'Held']);
      expect(stream.map((e) => e.eventId).sort()).toEqual(global.map((e) => e.eventId).sort());
    });
  });
}
