// Fixtures the parts of the EventStore contract share (event-store.contract.ts runs them): event
// and stream builders, a bounded subscription collector and readAll, and a rejection catcher.
import { randomUUID } from 'node:crypto';
import { START, type EventStore, type NewEvent, type StoredEvent, type SubscriptionOrder } from '../../src/eventstore/event-store.ts';

export const newEvent = (type = 'Something', data: unknown = { n: 1 }): NewEvent => ({
  eventId: randomUUID(),
  type,
  data,
  metadata: { by: 'executor', occurredAt: new Date().toISOString() },
});
export const events = (n: number, type = 'Something') => Array.from({ length: n }, (_, i) => newEvent(type, { i }));
export const uniqueStream = (prefix = 'contract') => `${prefix}-${randomUUID()}`;

/** Collect from a subscription until `until` holds or the timeout passes. */
export async function collect(store: EventStore, after: bigint, prefixes: string[], until: (seen: StoredEvent[]) => boolean, timeoutMs = 5000, order: SubscriptionOrder = 'global') {
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

export async function expectRejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected the promise to reject');
}
