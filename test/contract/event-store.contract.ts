// The EventStore contract: every adapter runs this suite unchanged.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WrongExpectedRevisionError, DuplicateEventIdError } from '../../src/errors.ts';
import { START, type EventStore, type NewEvent, type StoredEvent } from '../../src/eventstore/event-store.ts';

export interface EventStoreHarness {
  store: EventStore;
  /**
   * Start an append in a transaction left open until commit(). Lets the suite commit two
   * transactions out of order. Adapters whose server orders commits itself omit it.
   */
  openAppend?: (streamId: string, events: NewEvent[], expectedRevision: bigint | 'no_stream') => Promise<{ commit(): Promise<void> }>;
  close(): Promise<void>;
}

export const newEvent = (type = 'Something', data: unknown = { n: 1 }): NewEvent => ({
  eventId: randomUUID(),
  type,
  data,
  metadata: { by: 'executor', occurredAt: new Date().toISOString() },
});
const events = (n: number, type = 'Something') => Array.from({ length: n }, (_, i) => newEvent(type, { i }));
const uniqueStream = (prefix = 'contract') => `${prefix}-${randomUUID()}`;

/** Collect from a subscription until `until` holds or the timeout passes. */
async function collect(store: EventStore, after: bigint, prefixes: string[], until: (seen: StoredEvent[]) => boolean, timeoutMs = 5000) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  const seen: StoredEvent[] = [];
  try {
    for await (const e of store.subscribe({ after, streamPrefixes: prefixes, signal: ac.signal })) {
      seen.push(e);
      if (until(seen)) break;
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return seen;
}

/**
 * readAll delivers an event only once every older transaction has finished, so events just
 * appended can be held back while another test holds a transaction open. Read until `count`
 * events are deliverable (bounded), the way a subscriber would wait.
 */
export async function readAllDeliverable(store: EventStore, prefix: string, count: number): Promise<StoredEvent[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const got = await store.readAll({ after: START, limit: 10_000, streamPrefixes: [prefix] });
    if (got.length >= count || Date.now() > deadline) return got;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function expectRejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the promise to reject');
}

export interface EventStoreCapabilities {
  /** The harness can hold an append's transaction open (EventStoreHarness.openAppend). */
  openTransactions: boolean;
  /**
   * The store refuses an eventId it already holds at any other place: in another stream, or at a
   * new revision of the same stream. Default true. EventStoreDB checks ids only at the revisions
   * an append claims (a retry at a stale revision), so it stores a reused id again elsewhere.
   */
  uniqueEventIds?: boolean;
  /** The store keeps snapshots of long streams (EventStore.snapshots). */
  snapshots?: boolean;
}

export function eventStoreContract(name: string, makeHarness: () => Promise<EventStoreHarness>, capabilities: EventStoreCapabilities) {
  describe(`EventStore contract: ${name}`, () => {
    let h: EventStoreHarness;
    let store: EventStore;
    beforeAll(async () => {
      h = await makeHarness();
      store = h.store;
    });
    afterAll(async () => {
      await h?.close();
    });

    it('appends a batch to a new stream and reads it back with contiguous revisions', async () => {
      const s = uniqueStream();
      const batch = events(3);
      const r = await store.append(s, batch, { expectedRevision: 'no_stream' });
      expect(r.nextExpectedRevision).toBe(2n);
      expect(r.idempotentReplay).toBe(false);
      const read = await store.readStream(s);
      expect(read.map((e) => e.revision)).toEqual([0n, 1n, 2n]);
      expect(read.map((e) => e.eventId)).toEqual(batch.map((e) => e.eventId));
      expect(read.map((e) => e.data)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
      expect(read[0]!.metadata).toEqual(batch[0]!.metadata);
      expect(read[0]!.recordedAt).toBeInstanceOf(Date);
      expect(read[2]!.globalPosition).toBe(r.lastPosition);
      expect(new Set(read.map((e) => e.globalPosition)).size).toBe(3);
    });

    it('appends at the exact expected revision and refuses a stale one with WrongExpectedRevisionError', async () => {
      const s = uniqueStream();
      await store.append(s, events(2), { expectedRevision: 'no_stream' });
      const ok = await store.append(s, events(1), { expectedRevision: 1n });
      expect(ok.nextExpectedRevision).toBe(2n);
      const err = await expectRejection(store.append(s, events(1), { expectedRevision: 1n }));
      expect(err).toBeInstanceOf(WrongExpectedRevisionError);
      expect((err as WrongExpectedRevisionError).actual).toBe(2n);
      expect((await store.readStream(s)).length).toBe(3);
    });

    it("refuses 'no_stream' for an existing stream and a revision for a missing one", async () => {
      const s = uniqueStream();
      await store.append(s, events(1), { expectedRevision: 'no_stream' });
      const exists = await expectRejection(store.append(s, events(1), { expectedRevision: 'no_stream' }));
      expect(exists).toBeInstanceOf(WrongExpectedRevisionError);
      expect((exists as WrongExpectedRevisionError).actual).toBe(0n);
      const missing = await expectRejection(store.append(uniqueStream(), events(1), { expectedRevision: 0n }));
      expect(missing).toBeInstanceOf(WrongExpectedRevisionError);
      expect((missing as WrongExpectedRevisionError).actual).toBe('no_stream');
    });

    it("appends with 'any' whatever the revision", async () => {
      const s = uniqueStream();
      expect((await store.append(s, events(2), { expectedRevision: 'any' })).nextExpectedRevision).toBe(1n);
      expect((await store.append(s, events(1), { expectedRevision: 'any' })).nextExpectedRevision).toBe(2n);
      expect((await store.readStream(s)).map((e) => e.revision)).toEqual([0n, 1n, 2n]);
    });

    it('lets exactly one of 50 concurrent appenders at one revision win', async () => {
      const s = uniqueStream();
      await store.append(s, events(1), { expectedRevision: 'no_stream' });
      const attempts = Array.from({ length: 50 }, (_, i) => events(2, `Contender${i}`));
      const results = await Promise.allSettled(attempts.map((batch) => store.append(s, batch, { expectedRevision: 0n })));
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(won.length).toBe(1);
      expect(lost.length).toBe(49);
      for (const l of lost) expect(l.reason).toBeInstanceOf(WrongExpectedRevisionError);
      const stream = await store.readStream(s);
      expect(stream.map((e) => e.revision)).toEqual([0n, 1n, 2n]);
      expect(stream[1]!.type).toBe(stream[2]!.type); // both events of the single winner
    });

    it('treats a retry of the same eventIds as the same append (idempotent)', async () => {
      const s = uniqueStream();
      const first = events(2);
      const r1 = await store.append(s, first, { expectedRevision: 'no_stream' });
      const again = await store.append(s, first, { expectedRevision: 'no_stream' });
      expect(again).toEqual({ ...r1, idempotentReplay: true });
      const second = events(3);
      const r2 = await store.append(s, second, { expectedRevision: 1n });
      expect(await store.append(s, second, { expectedRevision: 1n })).toEqual({ ...r2, idempotentReplay: true });
      expect(await store.append(s, second, { expectedRevision: 'any' })).toEqual({ ...r2, idempotentReplay: true });
      expect((await store.readStream(s)).length).toBe(5);
    });

    it('refuses a retry at a stale revision whose eventIds only partly match what is stored', async () => {
      const s = uniqueStream();
      const stored = events(2);
      await store.append(s, stored, { expectedRevision: 'no_stream' });
      const err = await expectRejection(store.append(s, [stored[0]!, newEvent()], { expectedRevision: 'no_stream' }));
      expect(err).toBeInstanceOf(DuplicateEventIdError);
      const err2 = await expectRejection(store.append(s, [newEvent(), stored[1]!], { expectedRevision: 0n }));
      expect(err2).toBeInstanceOf(DuplicateEventIdError);
      expect((await store.readStream(s)).map((e) => e.eventId)).toEqual(stored.map((e) => e.eventId));
    });

    const uniqueIds = capabilities.uniqueEventIds !== false;
    it.skipIf(!uniqueIds)(`refuses eventIds already stored elsewhere, without writing anything${uniqueIds ? '' : ' (skipped: event ids are unique per append position only)'}`, async () => {
      const s = uniqueStream();
      const stored = events(2);
      await store.append(s, stored, { expectedRevision: 'no_stream' });
      const mixed = [newEvent(), stored[1]!];
      const err = await expectRejection(store.append(s, mixed, { expectedRevision: 1n }));
      expect(err).toBeInstanceOf(DuplicateEventIdError);
      const other = uniqueStream();
      const err2 = await expectRejection(store.append(other, [stored[0]!], { expectedRevision: 'no_stream' }));
      expect(err2).toBeInstanceOf(DuplicateEventIdError);
      expect((await store.readStream(s)).length).toBe(2);
      expect(await store.readStream(other)).toEqual([]);
    });

    it('rejects malformed appends with a message naming the field', async () => {
      const s = uniqueStream();
      await expect(store.append(s, [], { expectedRevision: 'no_stream' })).rejects.toThrow(/events must be a non-empty array/);
      await expect(store.append(s, [{ ...newEvent(), eventId: 'nope' }], { expectedRevision: 'no_stream' })).rejects.toThrow(/events\[0\]\.eventId must be a uuid/);
      await expect(store.append(s, [{ ...newEvent(), type: '' }], { expectedRevision: 'no_stream' })).rejects.toThrow(/events\[0\]\.type/);
      expect(await store.readStream(s)).toEqual([]);
    });

    it('reads a stream forward from a revision, with a limit', async () => {
      const s = uniqueStream();
      await store.append(s, events(10), { expectedRevision: 'no_stream' });
      expect((await store.readStream(s, { fromRevision: 7n })).map((e) => e.revision)).toEqual([7n, 8n, 9n]);
      expect((await store.readStream(s, { fromRevision: 2n, limit: 2 })).map((e) => e.revision)).toEqual([2n, 3n]);
      expect(await store.readStream(uniqueStream())).toEqual([]);
    });

    it('reads all streams from a position, resumable, filtered by stream prefix', async () => {
      const prefix = `ra${randomUUID().slice(0, 8)}`;
      const a = uniqueStream(prefix);
      const b = uniqueStream(prefix);
      await store.append(a, events(2), { expectedRevision: 'no_stream' });
      await store.append(b, events(3), { expectedRevision: 'no_stream' });
      await store.append(uniqueStream('other'), events(1), { expectedRevision: 'no_stream' });
      await store.append(a, events(1), { expectedRevision: 1n });
      const all = await readAllDeliverable(store, prefix, 6);
      expect(all.map((e) => `${e.streamId === a ? 'a' : 'b'}${e.revision}`)).toEqual(['a0', 'a1', 'b0', 'b1', 'b2', 'a2']);
      const page1 = await store.readAll({ after: START, limit: 4, streamPrefixes: [prefix] });
      const page2 = await store.readAll({ after: page1[3]!.globalPosition, limit: 4, streamPrefixes: [prefix] });
      expect([...page1, ...page2].map((e) => e.eventId)).toEqual(all.map((e) => e.eventId));
    });

    it('deletes a whole stream at its expected revision, refuses a stale one, and a repeat is harmless', async () => {
      const s = uniqueStream();
      await store.append(s, events(3), { expectedRevision: 'no_stream' });
      const stale = await expectRejection(store.deleteStream(s, { expectedRevision: 1n }));
      expect(stale).toBeInstanceOf(WrongExpectedRevisionError);
      expect(await store.readStream(s)).toHaveLength(3);
      expect(await store.deleteStream(s, { expectedRevision: 2n })).toEqual({ deleted: 3 });
      expect(await store.readStream(s)).toEqual([]);
      expect(await store.deleteStream(s, { expectedRevision: 2n })).toEqual({ deleted: 0 });
      expect(await store.deleteStream(uniqueStream(), { expectedRevision: 0n })).toEqual({ deleted: 0 });
    });

    it('resumes a reader that checkpointed an event of a deleted stream right after that event', async () => {
      const prefix = `del${randomUUID().slice(0, 8)}`;
      const gone = uniqueStream(prefix);
      const kept = uniqueStream(prefix);
      await store.append(kept, events(1), { expectedRevision: 'no_stream' });
      await store.append(gone, events(2), { expectedRevision: 'no_stream' });
      const seen = await readAllDeliverable(store, prefix, 3);
      const checkpoint = seen[seen.length - 1]!;
      expect(checkpoint.streamId).toBe(gone);
      await store.deleteStream(gone, { expectedRevision: 1n });
      await store.append(kept, events(1), { expectedRevision: 0n });
      let next: StoredEvent[] = [];
      for (const until = Date.now() + 10_000; Date.now() < until && !next.some((e) => e.streamId === kept); await new Promise((r) => setTimeout(r, 20))) {
        next = await store.readAll({ after: checkpoint.globalPosition, limit: 10, streamPrefixes: [prefix] });
      }
      expect(next.filter((e) => e.streamId === kept).map((e) => e.revision)).toEqual([1n]);
    });

    it.skipIf(!capabilities.snapshots)('keeps the latest snapshot of a stream, and forgets it when asked', async () => {
      const snapshots = store.snapshots!;
      const s = uniqueStream();
      const at = (revision: bigint, machineVersion = '1') => ({ streamId: s, revision, eventId: randomUUID(), machineVersion, state: { revision: Number(revision) } });
      expect(await snapshots.read(s)).toBeUndefined();
      await snapshots.write(at(10n));
      await snapshots.write(at(5n)); // older: ignored
      expect((await snapshots.read(s))?.revision).toBe(10n);
      await snapshots.write(at(3n, '2')); // another machine version replaces it
      expect(await snapshots.read(s)).toMatchObject({ revision: 3n, machineVersion: '2', state: { revision: 3 } });
      await snapshots.delete([s]);
      expect(await snapshots.read(s)).toBeUndefined();
    });

    it('subscribes: catches up, then delivers live appends in order, and reports latency', async () => {
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

    it('ends a subscription promptly when its signal aborts', async () => {
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
    });
  });
}
