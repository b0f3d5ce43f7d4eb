// The EventStoreDB adapter's own logic (append read-back, conflict explanation, readAll paging,
// subscription resume and reconnect) against an in-memory model of the server, so it runs in
// every test run. The same contract suite runs against a real server in
// test/contract/event-store.eventstoredb.test.ts when BATON_EVENTSTORE_URL is set.
import { randomUUID } from 'node:crypto';
import type { EventStoreDBClient } from '@eventstore/db-client';
import { describe, expect, it } from 'vitest';
import { BatonError } from '../../src/errors.ts';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { createEventStoreDbEventStore } from '../../src/eventstore/eventstoredb.ts';
import { eventStoreContract, newEvent } from '../contract/event-store.contract.ts';
import { FakeEventStoreDb } from '../support/fake-eventstoredb.ts';

const fast = { reconnect: { initialMs: 5, maxMs: 20 } };
const storeOn = (fake: FakeEventStoreDb, o: { readAllPageSize?: number } = {}) =>
  createEventStoreDbEventStore(fake as unknown as EventStoreDBClient, { ...fast, ...o });

eventStoreContract(
  'eventstoredb adapter on an in-memory model of the server',
  async () => {
    const fake = new FakeEventStoreDb();
    fake.writeSystemEvent();
    const store = storeOn(fake, { readAllPageSize: 16 }); // small pages: readAll must page
    return { store, close: () => store.close() };
  },
  { openTransactions: false, uniqueEventIds: false },
);

describe('eventstoredb adapter (in-memory model of the server)', () => {
  it('stores a reused eventId in another stream again: the gap `uniqueEventIds: false` stands for', async () => {
    const store = storeOn(new FakeEventStoreDb());
    const e = newEvent();
    await store.append('contract-a', [e], { expectedRevision: 'no_stream' });
    const r = await store.append('contract-b', [e], { expectedRevision: 'no_stream' });
    expect(r.idempotentReplay).toBe(false);
    expect((await store.readStream('contract-b')).map((x) => x.eventId)).toEqual([e.eventId]);
  });

  it('never delivers system events and pages readAll past them', async () => {
    const fake = new FakeEventStoreDb();
    const store = storeOn(fake, { readAllPageSize: 2 });
    for (let i = 0; i < 5; i++) {
      fake.writeSystemEvent();
      await store.append(`s-${i}`, [newEvent()], { expectedRevision: 'no_stream' });
      fake.writeSystemEvent(`$$s-${i}`);
    }
    const all = await store.readAll({ after: START, limit: 100 });
    expect(all.map((e) => e.streamId)).toEqual(['s-0', 's-1', 's-2', 's-3', 's-4']);
    const rest = await store.readAll({ after: all[1]!.globalPosition, limit: 2 });
    expect(rest.map((e) => e.streamId)).toEqual(['s-2', 's-3']);
    await expect(store.readAll({ after: START, limit: 1, streamPrefixes: ['$stats-'] })).rejects.toThrow(/system streams/);
    await expect(store.append('$stats-x', [newEvent()], { expectedRevision: 'any' })).rejects.toThrow(/system streams/);
  });

  it('resubscribes after a dropped connection from the last position seen: nothing lost, nothing twice', async () => {
    const fake = new FakeEventStoreDb();
    const store = storeOn(fake);
    const s = `drop-${randomUUID()}`;
    await store.append(s, [newEvent(), newEvent()], { expectedRevision: 'no_stream' });
    const ac = new AbortController();
    const seen: StoredEvent[] = [];
    let wake: (() => void) | undefined;
    const consumer = (async () => {
      for await (const e of store.subscribe({ after: START, streamPrefixes: ['drop-'], signal: ac.signal })) {
        seen.push(e);
        wake?.();
      }
    })();
    const until = (n: number) =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`saw ${seen.length}/${n}`)), 2_000);
        wake = () => seen.length >= n && (clearTimeout(t), resolve());
        wake();
      });
    await until(2);
    fake.dropConnections();
    await store.append(s, [newEvent()], { expectedRevision: 1n }); // while disconnected
    await until(3);
    fake.dropConnections();
    fake.dropConnections();
    await store.append(s, [newEvent()], { expectedRevision: 2n });
    await until(4);
    ac.abort();
    await consumer;
    expect(seen.map((e) => e.revision)).toEqual([0n, 1n, 2n, 3n]);
    expect(fake.openSubscriptions).toBe(0);
  });

  it('gives up on an error that retrying cannot fix, and ends every subscription on close()', async () => {
    const fake = new FakeEventStoreDb();
    const store = storeOn(fake);
    await store.append('bad-1', [newEvent()], { expectedRevision: 'no_stream' });
    // A stored event without a position: the adapter cannot checkpoint it, so it must not loop.
    const original = fake.subscribeToAll.bind(fake);
    fake.subscribeToAll = (o) => {
      const sub = original(o);
      sub.on('confirmation', () => queueMicrotask(() => sub.write({ event: { streamId: 'bad-1', id: randomUUID(), revision: 9n, type: 'T', data: {}, metadata: {}, isJson: true, created: new Date() } })));
      return sub;
    };
    const iterate = async () => {
      for await (const _ of store.subscribe({ after: START, streamPrefixes: ['bad-'] })) void _;
    };
    await expect(iterate()).rejects.toThrow(BatonError);
    fake.subscribeToAll = original;

    const running = (async () => {
      const got: StoredEvent[] = [];
      for await (const e of store.subscribe({ after: START, streamPrefixes: ['bad-'] })) got.push(e);
      return got;
    })();
    await new Promise((r) => setTimeout(r, 20));
    await store.close();
    expect((await running).length).toBe(1);
    // A new subscription on the closed store is refused, not ended at once (a caller that resubscribes would spin).
    await expect(iterate()).rejects.toThrow(/the EventStoreDB event store is closed/);
  });

  it("says in Baton's words why the server refused an append: a deleted stream, the maximum append size, a system event type", async () => {
    const fake = new FakeEventStoreDb();
    const store = storeOn(fake);
    await store.append('gone-1', [newEvent()], { expectedRevision: 'no_stream' });
    await store.deleteStream('gone-1', { expectedRevision: 0n });
    await expect(store.append('gone-1', [newEvent()], { expectedRevision: 'no_stream' })).rejects.toThrow(/^append to gone-1: the stream was deleted \(retention archived it\), and EventStoreDB never takes events under a deleted stream's id again$/);
    const original = fake.appendToStream.bind(fake);
    fake.appendToStream = async () => {
      throw Object.assign(new Error('Maximum Append Size of 1048576 Exceeded.'), { type: 'maximum-append-size-exceeded', maxAppendSize: 1_048_576 });
    };
    await expect(store.append('big-1', [newEvent()], { expectedRevision: 'no_stream' })).rejects.toThrow(/^append to big-1: larger than EventStoreDB's maximum append size \(1048576 bytes\): raise it on the server \(EVENTSTORE_MAX_APPEND_SIZE/);
    fake.appendToStream = original;
    await expect(store.append('sys-1', [{ ...newEvent(), type: '$metadata' }], { expectedRevision: 'no_stream' })).rejects.toThrow(/event type \$metadata: types starting with '\$' are EventStoreDB system events/);
    expect(await store.readStream('sys-1')).toEqual([]);
  });
});
