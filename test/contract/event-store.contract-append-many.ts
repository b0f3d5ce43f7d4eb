// The EventStore contract's batch tests: appendMany's per-request outcomes, and many concurrent
// appends (what an adapter may coalesce into one commit) each getting its own outcome.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DuplicateEventIdError, WrongExpectedRevisionError } from '../../src/errors.ts';
import type { AppendOutcome } from '../../src/eventstore/event-store.ts';
import type { EventStoreSuite } from './event-store.contract.ts';
import { events, newEvent, readAllDeliverable, uniqueStream } from './event-store.fixtures.ts';

export function appendManyTests(suite: EventStoreSuite): void {
  describe('appendMany', () => {
    const okResult = (o: AppendOutcome) => {
      if (!o.ok) throw o.error;
      return o.result;
    };

    it('stores every stream that is at its expected revision and reports the one that conflicts', async () => {
      const { store } = suite;
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
      const { store } = suite;
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
      const { store } = suite;
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
      const { store } = suite;
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
      const { store } = suite;
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
    const { store } = suite;
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
}
