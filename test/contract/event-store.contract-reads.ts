// The EventStore contract's read tests: readStream and readAll, deleting a stream (and reading
// past it), and snapshots.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { WrongExpectedRevisionError } from '../../src/errors.ts';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import type { EventStoreSuite } from './event-store.contract.ts';
import { events, expectRejection, readAllDeliverable, uniqueStream } from './event-store.fixtures.ts';

export function readTests(suite: EventStoreSuite): void {
  const { capabilities } = suite;

  it('reads a stream forward from a revision, with a limit', async () => {
    const { store } = suite;
    const s = uniqueStream();
    await store.append(s, events(10), { expectedRevision: 'no_stream' });
    expect((await store.readStream(s, { fromRevision: 7n })).map((e) => e.revision)).toEqual([7n, 8n, 9n]);
    expect((await store.readStream(s, { fromRevision: 2n, limit: 2 })).map((e) => e.revision)).toEqual([2n, 3n]);
    expect(await store.readStream(uniqueStream())).toEqual([]);
  });

  it('reads all streams from a position, resumable, filtered by stream prefix', async () => {
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
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
    const { store } = suite;
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
}
