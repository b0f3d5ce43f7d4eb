// How every host follows the event store: catch up from a position with readAll in batches
// (so the host knows when its state is complete and may act), then follow live appends with
// subscribe. Whatever fails on the way (the database restarts, fails over, terminates the
// connection; a handler cannot do its part now) is logged and retried with one policy
// (src/async/backoff.ts: 100 ms doubling to 5 s, back to 100 ms after progress), resuming right
// after the last event handled, so the caller's in-memory state stays valid in between and no
// event is skipped or handled twice.
import type { Logger } from 'pino';
import { Backoff } from '../async/backoff.ts';
import { START, type EventStore, type StoredEvent } from './event-store.ts';

export interface FollowOptions {
  store: EventStore;
  streamPrefixes: string[];
  signal: AbortSignal;
  log: Logger;
  /** Who follows, for the log lines (e.g. "executor"). */
  who: string;
  /** Start after this position (the last event already applied); default START. */
  after?: bigint;
  /** Events per catch-up read. Default 5,000. */
  batchSize?: number;
}

export interface FollowHandlers {
  /**
   * One event, in the store's commit order. Throwing means "not now": the same event comes again
   * after the backoff. A handler that wants an event skipped catches its own error.
   */
  onEvent(event: StoredEvent): void | Promise<void>;
  /** Once, when the catch-up read found nothing more: the caller's state holds everything stored up to here. */
  onCaughtUp?(position: bigint): void | Promise<void>;
}

/** Resolves when the signal aborts; never rejects because the store (or a handler) failed. */
export async function catchUpAndFollow(o: FollowOptions, h: FollowHandlers): Promise<void> {
  const backoff = new Backoff();
  let after = o.after ?? START;
  let caughtUp = false;
  const handle = async (event: StoredEvent) => {
    await h.onEvent(event);
    after = event.globalPosition;
    backoff.reset();
  };
  while (!o.signal.aborted) {
    try {
      while (!caughtUp && !o.signal.aborted) {
        const batch = await o.store.readAll({ after, limit: o.batchSize ?? 5_000, streamPrefixes: o.streamPrefixes });
        for (const event of batch) await handle(event);
        if (batch.length === 0) {
          caughtUp = true;
          await h.onCaughtUp?.(after);
        }
      }
      for await (const event of o.store.subscribe({ after, streamPrefixes: o.streamPrefixes, signal: o.signal })) await handle(event);
    } catch (err) {
      if (o.signal.aborted) break;
      o.log.error({ err, retryInMs: backoff.nextMs }, `${o.who} lost the event store (or could not handle an event); resuming after the last event handled`);
      await backoff.wait(o.signal);
    }
  }
}
