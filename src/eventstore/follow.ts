// Following the event store live, as the hosts do once caught up: subscribe from a position and,
// when the database goes away (restart, failover, a terminated connection), wait and resume from
// the last event handled, so the caller's in-memory state stays valid in between.
import type { Logger } from 'pino';
import type { EventStore, StoredEvent } from './event-store.ts';

export interface FollowOptions {
  store: EventStore;
  /** Resume after this position (the last event the caller applied while catching up). */
  after: bigint;
  streamPrefixes: string[];
  signal: AbortSignal;
  log: Logger;
  /** Who follows, for the log line when the subscription is lost (e.g. "executor"). */
  who: string;
}

/** Resolves when the signal aborts; never rejects because the store failed. */
export async function followStore(o: FollowOptions, onEvent: (event: StoredEvent) => void): Promise<void> {
  let after = o.after;
  let backoffMs = 100;
  while (!o.signal.aborted) {
    try {
      for await (const event of o.store.subscribe({ after, streamPrefixes: o.streamPrefixes, signal: o.signal })) {
        onEvent(event);
        after = event.globalPosition;
        backoffMs = 100;
      }
    } catch (err) {
      if (o.signal.aborted) break;
      o.log.error({ err, retryInMs: backoffMs }, `${o.who} lost the event store subscription; resuming from the last event seen`);
      await new Promise((r) => setTimeout(r, backoffMs).unref());
      backoffMs = Math.min(backoffMs * 2, 5_000);
    }
  }
}
