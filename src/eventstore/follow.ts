// How every host follows the event store: catch up from a position with readAll in batches
// (so the host knows when its state is complete and may act), then follow live appends with
// subscribe. Whatever fails on the way (the database restarts, fails over, terminates the
// connection) is logged and retried with one policy (src/async/backoff.ts: 100 ms doubling to
// 5 s, back to 100 ms after progress), resuming right after the last event handled, so the
// caller's in-memory state stays valid in between and no event is skipped or handled twice. A
// handler that cannot do its part now (it throws) gets the same event again after the backoff.
//
// What order a host needs (SubscriptionOrder in event-store.ts):
// - `global`: the projector, which checkpoints one position and so needs every event in the
//   store's commit order without gaps; it waits for older transactions anywhere on the server.
// - `stream`: the executor's and orchestrator's follower (src/runtime/follow-actors.ts), which
//   fold each stream into its own snapshot and act on each stream's changes; they need each
//   stream's events in order and every event once, not the order across streams, and must not
//   wait on other applications' transactions to see new work.
import type { Logger } from 'pino';
import { Backoff } from '../async/backoff.ts';
import { START, type AppendOrigin, type EventStore, type StoredEvent, type SubscriptionOrder, type SubscriptionResume } from './event-store.ts';

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
  /** What the follower needs once caught up (see the header). Default `global`. */
  order?: SubscriptionOrder;
  /** `stream` order: appenders that apply their own events for the caller (SubscribeOptions.appliedBy). */
  appliedBy?: ReadonlySet<AppendOrigin>;
}

export interface FollowHandlers {
  /**
   * One event: in the store's commit order (`global`), or in its stream's order (`stream`).
   * Throwing means "not now": the same event comes again after the backoff. A handler that
   * wants an event skipped catches its own error.
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
  // A `stream` subscription's place, kept by the store across resubscriptions.
  const resume: SubscriptionResume = {};
  const handled = (event: StoredEvent): true => {
    after = event.globalPosition;
    backoff.reset();
    return true;
  };
  /**
   * Handle one event, retrying it after the backoff until it is handled (false: we stopped). A
   * handler that returns no promise is not awaited: most events a busy host reads are its own
   * appends, passed over at once, and their promises were 135 of the 1,976 MB it allocated per
   * 20,000 executions in `baton bench` (60 of 1,848 MB after).
   */
  const handle = (event: StoredEvent): true | Promise<boolean> => {
    try {
      const pending = h.onEvent(event);
      if (pending === undefined) return handled(event);
      return pending.then(
        () => handled(event),
        (err: unknown) => retry(event, err),
      );
    } catch (err) {
      return retry(event, err);
    }
  };
  const retry = async (event: StoredEvent, err: unknown): Promise<boolean> => {
    if (o.signal.aborted) return false;
    o.log.error({ err, retryInMs: backoff.nextMs, streamId: event.streamId, revision: Number(event.revision) }, `${o.who} could not handle an event; trying it again`);
    await backoff.wait(o.signal);
    return !o.signal.aborted && (await handle(event));
  };
  while (!o.signal.aborted) {
    try {
      while (!caughtUp && !o.signal.aborted) {
        const batch = await o.store.readAll({ after, limit: o.batchSize ?? 5_000, streamPrefixes: o.streamPrefixes });
        for (const event of batch) {
          const ok = handle(event);
          if (ok !== true && !(await ok)) return;
        }
        if (batch.length === 0) {
          caughtUp = true;
          await h.onCaughtUp?.(after);
        }
      }
      const live = o.store.subscribe({ after, streamPrefixes: o.streamPrefixes, signal: o.signal, order: o.order ?? 'global', resume, ...(o.appliedBy && { appliedBy: o.appliedBy }) });
      for await (const event of live) {
        const ok = handle(event);
        if (ok !== true && !(await ok)) return;
      }
    } catch (err) {
      if (o.signal.aborted) break;
      o.log.error({ err, retryInMs: backoff.nextMs }, `${o.who} lost the event store; resuming after the last event handled`);
      await backoff.wait(o.signal);
    }
  }
}
