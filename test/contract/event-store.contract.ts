// The EventStore contract: every adapter runs this suite unchanged.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WrongExpectedRevisionError, DuplicateEventIdError } from '../../src/errors.ts';
import { START, type AppendOutcome, type EventStore, type NewEvent, type StoredEvent, type SubscriptionOrder, type SubscriptionResume } from '../../src/eventstore/event-store.ts';

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
async function collect(store: EventStore, after: bigint, prefixes: string[], until: (seen: StoredEvent[]) => boolean, timeoutMs = 5000, order: SubscriptionOrder = 'global') {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  const seen: StoredEvent[] = [];
  try {
    for await (const e of store.subscribe({ after, streamPrefixes: prefixes, signal: ac.signal, order })) {
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

    describe('appendMany', () => {
      const okResult = (o: AppendOutcome) => {
        if (!o.ok) throw o.error;
        return o.result;
      };

      it('stores every stream that is at its expected revision and reports the one that conflicts', async () => {
        const [a, b, c] = [uniqueStream(), uniqueStream(), uniqueStream()];
        await store.append(b, events(2), { expectedRevision: 'no_stream' });
        await store.append(c, events(1), { expectedRevision: 'no_stream' });
        const out = await store.appendMany([
          { streamId: a, events: events(2), expectedRevision: 'no_stream' },
          { streamId: b, events: events(1), expectedRevision: 0n }, // stale: b is at 1
          { streamId: c, events: events(3), expectedRevision: 0n },
          { streamId: uniqueStream(), events: [], expectedRevision: 'no_stream' }, // malformed: its own outcome
        ]);
        expect(okResult(out[0]!).nextExpectedRevision).toBe(1n);
        expect(out[1]!.ok).toBe(false);
        expect(!out[1]!.ok && out[1]!.error).toBeInstanceOf(WrongExpectedRevisionError);
        expect(!out[1]!.ok && (out[1]!.error as WrongExpectedRevisionError).actual).toBe(1n);
        expect(okResult(out[2]!).nextExpectedRevision).toBe(3n);
        expect(!out[3]!.ok && out[3]!.error.message).toMatch(/events must be a non-empty array/);
        expect((await store.readStream(a)).length).toBe(2);
        expect((await store.readStream(b)).length).toBe(2);
        expect((await store.readStream(c)).map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n]);
      });

      it('recognises a retry of an append already stored, inside a batch, as with append()', async () => {
        const [a, b] = [uniqueStream(), uniqueStream()];
        const first = events(2);
        const r1 = await store.append(a, first, { expectedRevision: 'no_stream' });
        const fresh = events(1);
        const out = await store.appendMany([
          { streamId: a, events: first, expectedRevision: 'no_stream' }, // the retry
          { streamId: b, events: fresh, expectedRevision: 'no_stream' },
          { streamId: b, events: fresh, expectedRevision: 'no_stream' }, // the same request twice in one batch
          { streamId: a, events: [first[0]!, newEvent()], expectedRevision: 'no_stream' }, // ids only partly stored
        ]);
        expect(okResult(out[0]!)).toEqual({ ...r1, idempotentReplay: true });
        const rb = okResult(out[1]!);
        expect(rb.idempotentReplay).toBe(false);
        expect(okResult(out[2]!)).toEqual({ ...rb, idempotentReplay: true });
        expect(!out[3]!.ok && out[3]!.error).toBeInstanceOf(DuplicateEventIdError);
        expect((await store.readStream(a)).map((e) => e.eventId)).toEqual(first.map((e) => e.eventId));
        expect((await store.readStream(b)).map((e) => e.eventId)).toEqual(fresh.map((e) => e.eventId));
      });

      it('treats two requests of one stream as appended one after the other', async () => {
        const s = uniqueStream();
        const out = await store.appendMany([
          { streamId: s, events: events(2, 'First'), expectedRevision: 'no_stream' },
          { streamId: s, events: events(1, 'Second'), expectedRevision: 1n },
          { streamId: s, events: events(1, 'Stale'), expectedRevision: 1n },
        ]);
        expect(okResult(out[0]!).nextExpectedRevision).toBe(1n);
        expect(okResult(out[1]!).nextExpectedRevision).toBe(2n);
        expect(!out[2]!.ok && (out[2]!.error as WrongExpectedRevisionError).actual).toBe(2n);
        expect((await store.readStream(s)).map((e) => e.type)).toEqual(['First', 'First', 'Second']);
      });

      it('concurrent batches that share streams each store every request, one after the other per stream', async () => {
        // 8 callers at once, each appending (any revision) to 12 of the same 30 streams, three times over.
        const streams = Array.from({ length: 30 }, () => uniqueStream());
        await store.appendMany(streams.map((s) => ({ streamId: s, events: events(1, 'Created'), expectedRevision: 'no_stream' as const })));
        const picks = (caller: number, round: number) => Array.from({ length: 12 }, (_, k) => streams[(caller * 7 + round * 5 + k * 2) % 30]!);
        const appended = new Map(streams.map((s) => [s, 1]));
        const outcomes = await Promise.all(
          Array.from({ length: 8 }, async (_, caller) => {
            const all: AppendOutcome[] = [];
            for (let round = 0; round < 3; round++) {
              const mine = [...new Set(picks(caller, round))];
              for (const s of mine) appended.set(s, appended.get(s)! + 1);
              all.push(...(await store.appendMany(mine.map((s) => ({ streamId: s, events: events(1, `C${caller}`), expectedRevision: 'any' as const })))));
            }
            return all;
          }),
        );
        outcomes.flat().forEach(okResult);
        for (const s of streams) expect((await store.readStream(s)).map((e) => e.revision)).toEqual(Array.from({ length: appended.get(s)! }, (_, i) => BigInt(i)));
      });

      it('readAll returns a batch with each stream in revision order, before anything appended after it', async () => {
        const prefix = `am${randomUUID().slice(0, 8)}`;
        const streams = Array.from({ length: 5 }, () => uniqueStream(prefix));
        const out = await store.appendMany(streams.map((s) => ({ streamId: s, events: events(3), expectedRevision: 'no_stream' as const })));
        out.forEach(okResult);
        const later = uniqueStream(prefix);
        await store.append(later, events(1, 'Later'), { expectedRevision: 'no_stream' });
        const all = await readAllDeliverable(store, prefix, 16);
        expect(all.length).toBe(16);
        for (const s of streams) expect(all.filter((e) => e.streamId === s).map((e) => e.revision)).toEqual([0n, 1n, 2n]);
        expect(all[15]!.streamId).toBe(later);
        // Each event's lastPosition is the position readAll gives it.
        out.forEach((o, i) => expect(all.filter((e) => e.streamId === streams[i])[2]!.globalPosition).toBe(okResult(o).lastPosition));
      });
    });

    it('gives each of many concurrent appends its own outcome', async () => {
      const streams = Array.from({ length: 40 }, () => uniqueStream());
      const contested = uniqueStream();
      await store.append(contested, events(1), { expectedRevision: 'no_stream' });
      const results = await Promise.allSettled([
        ...streams.map((s, i) => store.append(s, events(1 + (i % 3)), { expectedRevision: 'no_stream' })),
        ...Array.from({ length: 5 }, () => store.append(contested, events(1), { expectedRevision: 0n })),
        store.append(uniqueStream(), [{ ...newEvent(), eventId: 'nope' }], { expectedRevision: 'no_stream' }),
      ]);
      results.slice(0, 40).forEach((r, i) => {
        expect(r.status).toBe('fulfilled');
        expect(r.status === 'fulfilled' && r.value.nextExpectedRevision).toBe(BigInt(i % 3));
      });
      const contestedResults = results.slice(40, 45);
      expect(contestedResults.filter((r) => r.status === 'fulfilled').length).toBe(1);
      for (const r of contestedResults) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(WrongExpectedRevisionError);
      expect(results[45]!.status === 'rejected' && (results[45] as PromiseRejectedResult).reason.message).toMatch(/eventId must be a uuid/);
      for (const [i, s] of streams.entries()) expect((await store.readStream(s)).length).toBe(1 + (i % 3));
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

    it('subscribes in stream order: every event once, each stream in revision order, live appends from many writers', async () => {
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

      it('stream order delivers what committed while an older transaction is still open, and the open one’s events once it commits, each once', async () => {
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
  });
}
