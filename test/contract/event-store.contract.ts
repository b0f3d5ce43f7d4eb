// The EventStore contract: every adapter runs this suite unchanged.
//
// This file holds the suite's setup; its tests are in event-store.contract-appends.ts,
// -append-many.ts, -reads.ts and -subscriptions.ts, and what they share in event-store.fixtures.ts.
import { afterAll, beforeAll, describe } from 'vitest';
import type { EventStore, NewEvent } from '../../src/eventstore/event-store.ts';
import { appendManyTests } from './event-store.contract-append-many.ts';
import { appendTests } from './event-store.contract-appends.ts';
import { readTests } from './event-store.contract-reads.ts';
import { subscriptionTests } from './event-store.contract-subscriptions.ts';

export { newEvent, readAllDeliverable } from './event-store.fixtures.ts';

export interface EventStoreHarness {
  store: EventStore;
  /**
   * Start an append in a transaction left open until commit(). Lets the suite commit two
   * transactions out of order. Adapters whose server orders commits itself omit it.
   */
  openAppend?: (streamId: string, events: NewEvent[], expectedRevision: bigint | 'no_stream') => Promise<{ commit(): Promise<void> }>;
  close(): Promise<void>;
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

/**
 * What the parts of the suite get from its setup. `h` and `store` are opened in beforeAll: read
 * them inside a test.
 */
export interface EventStoreSuite {
  readonly name: string;
  readonly capabilities: EventStoreCapabilities;
  readonly h: EventStoreHarness;
  readonly store: EventStore;
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

    const suite: EventStoreSuite = {
      name,
      capabilities,
      get h() {
        return h;
      },
      get store() {
        return store;
      },
    };

    // The order of registration is the order the tests run in.
    appendTests(suite);
    appendManyTests(suite);
    readTests(suite);
    subscriptionTests(suite);
  });
}
