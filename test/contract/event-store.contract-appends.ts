// The EventStore contract's append tests: expected revisions, concurrent appenders at one
// revision, idempotent retries, duplicate event ids and malformed appends.
import { expect, it } from 'vitest';
import { DuplicateEventIdError, WrongExpectedRevisionError } from '../../src/errors.ts';
import type { EventStoreSuite } from './event-store.contract.ts';
import { events, expectRejection, newEvent, uniqueStream } from './event-store.fixtures.ts';

export function appendTests(suite: EventStoreSuite): void {
  const { capabilities } = suite;

  it('appends a batch to a new stream and reads it back with contiguous revisions', async () => {
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
    const s = uniqueStream();
    expect((await store.append(s, events(2), { expectedRevision: 'any' })).nextExpectedRevision).toBe(1n);
    expect((await store.append(s, events(1), { expectedRevision: 'any' })).nextExpectedRevision).toBe(2n);
    expect((await store.readStream(s)).map((e) => e.revision)).toEqual([0n, 1n, 2n]);
  });

  it('lets exactly one of 50 concurrent appenders at one revision win', async () => {
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
    const s = uniqueStream();
    await expect(store.append(s, [], { expectedRevision: 'no_stream' })).rejects.toThrow(/events must be a non-empty array/);
    await expect(store.append(s, [{ ...newEvent(), eventId: 'nope' }], { expectedRevision: 'no_stream' })).rejects.toThrow(/events\[0\]\.eventId must be a uuid/);
    await expect(store.append(s, [{ ...newEvent(), type: '' }], { expectedRevision: 'no_stream' })).rejects.toThrow(/events\[0\]\.type/);
    expect(await store.readStream(s)).toEqual([]);
  });
}
