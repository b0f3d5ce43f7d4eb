// The EventStoreDB / KurrentDB adapter behind the EventStore port (@eventstore/db-client v6,
// gRPC). Selected when BATON_EVENTSTORE_URL is set; projections, the read model, liveness and
// the work queue stay in Postgres. The pure translation (positions, metadata, errors) lives in
// ./eventstoredb-mapping.ts.
//
// What EventStoreDB guarantees, and what this adapter adds to meet the port's contract:
//
// - Order. The server appends to one log and serves $all only up to what it has committed and
//   indexed, in log order, so nothing that commits late can appear behind a reader's position
//   (the Postgres adapter needs transaction horizons for that; here there is nothing to do).
//   globalPosition = the event's commit position (see the mapping module for why it is unique).
//
// - Idempotent appends. The Baton eventId is the EventStoreDB event id. The server compares ids
//   only at the revisions an append claims: an append whose expected revision is behind the
//   stream is a no-op success if the events already stored after that revision have the same
//   ids, a conflict if none do, and a conflict too if only some do. With 'any' it checks a cache
//   of recently written ids (best effort: after a restart it may store a retry twice; Baton
//   itself never appends with 'any'). Its reply does not say whether it wrote or deduplicated
//   (a duplicate's reply carries the same revision, and on newer servers the same position), so
//   each append stamps a random id into its last event's metadata (APPEND_ID_KEY) and reads that
//   one event back: another call's stamp means the append was a retry (idempotentReplay), and
//   the event read gives lastPosition from the log itself. Cost: one indexed single-event read
//   per append.
//
// - Gap against the contract: EventStoreDB does not keep event ids unique across the store. A
//   reused id in another stream, or at a new revision of the same stream (expected revision =
//   the stream's current one), is simply stored again. Refused duplicates are only those the
//   server's check above catches: a retry at a stale revision whose ids partly match, which this
//   adapter reports as DuplicateEventIdError like Postgres does. The contract suite runs this
//   adapter with `uniqueEventIds: false` and skips the one test that needs more.
//
// - appendMany. EventStoreDB has no transaction across streams: per-stream atomicity is this
//   adapter's contract. Each request is an append of its own (different streams at once, one
//   stream's requests in order), each with its own outcome; a failure part way through leaves the
//   streams already appended stored, and a retry of the whole batch is recognised stream by
//   stream as idempotent. No group committer either: the client multiplexes appends over one
//   gRPC connection and the server batches its own log writes.
//
// - readAll. The v6 client cannot filter a read of $all on the server (subscribeToAll can), so
//   readAll pages through $all and keeps the wanted streams itself; system streams ($…) are
//   never returned. A catch-up read therefore costs everything written after `after`, not just
//   Baton's streams (EventStoreDB's own system events are few unless stats are written to the
//   database). subscribe(), which hosts follow once caught up, filters on the server.
//
// - deleteStream tombstones the stream (retention): its events stop being readable from the
//   stream at once, but stay in $all until a scavenge has rewritten the chunks holding them
//   (readers that scan $all pass over archived streams: deletedStreamsStayInReadAll), and the id
//   is never taken again (an append to it is refused, said as a BatonError).
//
// - Subscriptions are catch-up subscriptions to $all from `after`. When the connection drops or
//   the server restarts, the subscription is reopened from the last position seen (backoff
//   doubling from 100 ms to 5 s), until the caller's signal aborts or the store is closed.
import { randomUUID } from 'node:crypto';
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type ResolvedEvent,
} from '@eventstore/db-client';
import type { Logger } from 'pino';
import { BatonError, DuplicateEventIdError } from '../errors.ts';
import { appendEach, validateAppend } from './append-validation.ts';
import type { SnapshotStore } from './snapshots.ts';
import type { AppendResult, EventStore, ExpectedRevision, NewEvent, ReadAllOptions, StoredEvent, SubscribeOptions } from './event-store.ts';
import {
  appendIdOf,
  compareStored,
  currentRevision,
  globalPositionOf,
  isPast,
  isPermanentSubscriptionError,
  isSystemStream,
  isWrongExpectedVersion,
  readPositionAfter,
  reconnectDelay,
  retryRange,
  streamFilterFor,
  toEsdbConnectionString,
  toEsdbExpectedRevision,
  toEventData,
  toStoredEvent,
  toWrongExpectedRevision,
  wanted,
  DEFAULT_RECONNECT_BACKOFF,
  type Backoff,
} from './eventstoredb-mapping.ts';
import { sleep } from '../async/sleep.ts';

export interface EventStoreDbEventStoreOptions {
  log?: Logger;
  /** Wait between subscription reconnect attempts: doubling from initialMs to maxMs. */
  reconnect?: Backoff;
  /** readAll: $all events fetched per round trip while looking for wanted streams. */
  readAllPageSize?: number;
  /** Where snapshots of long streams are kept: Baton's Postgres (src/eventstore/snapshots.ts), never EventStoreDB itself. */
  snapshots?: SnapshotStore;
}

export interface EventStoreDbEventStore extends EventStore {
  readonly client: EventStoreDBClient;
}

/** How long a confirmed subscription must have lasted for its drop to restart the backoff. */
const HEALTHY_AFTER_MS = 10_000;

/**
 * The server's refusals that are not about revisions, said in Baton's words: an append past its
 * maximum append size (1 MiB unless raised: Baton's events may hold 4 MiB of JSON each), and an
 * append to a deleted stream, whose id EventStoreDB never takes again.
 */
function appendRefusal(streamId: string, err: unknown): unknown {
  const e = err as { type?: unknown; maxAppendSize?: unknown } | null;
  if (e?.type === 'maximum-append-size-exceeded') {
    return new BatonError(`append to ${streamId}: larger than EventStoreDB's maximum append size${typeof e.maxAppendSize === 'number' && e.maxAppendSize > 0 ? ` (${e.maxAppendSize} bytes)` : ''}: raise it on the server (EVENTSTORE_MAX_APPEND_SIZE; docker-compose.eventstoredb.yml sets 16 MiB)`, { cause: err });
  }
  if (e?.type === 'stream-deleted') {
    return new BatonError(`append to ${streamId}: the stream was deleted (retention archived it), and EventStoreDB never takes events under a deleted stream's id again`, { cause: err });
  }
  return err;
}

/** No such stream, or one that was deleted (a tombstoned stream reads as "deleted"): either way, no events. */
const isStreamNotFound = (err: unknown) => ['stream-not-found', 'stream-deleted'].includes((err as { type?: unknown } | null)?.type as string);


/**
 * A store on an EventStoreDB/KurrentDB server. Given a connection string (esdb://, esdb+discover://,
 * kurrentdb://…) it creates the client and close() disposes of it; given a client, the caller
 * keeps ownership and close() only ends this store's subscriptions.
 */
export function createEventStoreDbEventStore(clientOrConnectionString: EventStoreDBClient | string, options: EventStoreDbEventStoreOptions = {}): EventStoreDbEventStore {
  const owned = typeof clientOrConnectionString === 'string';
  const client = owned ? EventStoreDBClient.connectionString(toEsdbConnectionString(clientOrConnectionString)) : clientOrConnectionString;
  const log = options.log;
  const backoff = options.reconnect ?? DEFAULT_RECONNECT_BACKOFF;
  const pageSize = options.readAllPageSize ?? 1_000;
  const closing = new AbortController();

  /** Raw events of one stream from a revision; none for a stream that does not exist. */
  async function readRaw(streamId: string, fromRevision: bigint, maxCount?: number, requiresLeader = false): Promise<ResolvedEvent[]> {
    const out: ResolvedEvent[] = [];
    try {
      const read = client.readStream(streamId, { direction: FORWARDS, fromRevision, ...(maxCount !== undefined ? { maxCount } : {}), requiresLeader });
      for await (const resolved of read) out.push(resolved);
    } catch (err) {
      if (isStreamNotFound(err)) return [];
      throw err;
    }
    return out;
  }

  async function streamRevision(streamId: string): Promise<bigint | 'no_stream'> {
    try {
      for await (const resolved of client.readStream(streamId, { direction: BACKWARDS, fromRevision: END, maxCount: 1, requiresLeader: true })) {
        if (resolved.event) return resolved.event.revision;
      }
    } catch (err) {
      if (!isStreamNotFound(err)) throw err;
    }
    return 'no_stream';
  }

  /** Read back the batch's last event: where it landed, and whether this call wrote it. */
  async function confirm(streamId: string, events: NewEvent[], lastRevision: bigint, appendId: string | null): Promise<AppendResult> {
    const [last] = await readRaw(streamId, lastRevision, 1, true);
    const lastId = events[events.length - 1]!.eventId.toLowerCase();
    if (!last?.event || last.event.id.toLowerCase() !== lastId) {
      throw new BatonError(
        `append to ${streamId}: EventStoreDB acknowledged the append up to revision ${lastRevision}, ` +
          `but the event there is ${last?.event?.id ?? 'missing'}, not ${lastId}`,
      );
    }
    return {
      nextExpectedRevision: lastRevision,
      lastPosition: globalPositionOf(last),
      idempotentReplay: appendId === null || appendIdOf(last.event.metadata) !== appendId,
    };
  }

  /**
   * The server refused the append. Tell a conflict from a retry whose ids only partly match what
   * is stored (DuplicateEventIdError), or from a complete earlier append (return its result).
   */
  async function explainRefusal(streamId: string, events: NewEvent[], expected: ExpectedRevision, actual: bigint | 'no_stream', cause: unknown): Promise<AppendResult> {
    const ids = events.map((e) => e.eventId);
    if (expected === 'any') {
      // With 'any' the server refuses only a batch whose first id it has stored and the rest not.
      throw new DuplicateEventIdError(streamId, [ids[0]!]);
    }
    const range = retryRange(expected, actual, events.length);
    if (range) {
      const stored = await readRaw(streamId, range.fromRevision, range.count, true);
      const verdict = compareStored(ids, stored.map((r) => r.event?.id ?? ''));
      if (verdict === 'same') return confirm(streamId, events, range.fromRevision + BigInt(events.length - 1), null);
      if (verdict !== 'none') throw new DuplicateEventIdError(streamId, verdict.some);
    }
    throw toWrongExpectedRevision(streamId, expected, actual, cause);
  }

  async function append(streamId: string, events: NewEvent[], o: { expectedRevision: ExpectedRevision }): Promise<AppendResult> {
    validateAppend(streamId, events, o.expectedRevision);
    if (isSystemStream(streamId)) throw new BatonError(`append to ${streamId}: stream ids starting with '$' are EventStoreDB system streams`);
    // The server stores them, but reads of $all and of the stream pass over system events: the stream would show a gap.
    const system = events.find((e) => e.type.startsWith('$'));
    if (system) throw new BatonError(`append to ${streamId}: event type ${system.type}: types starting with '$' are EventStoreDB system events, which reads leave out`);
    const expected = o.expectedRevision;
    const appendId = randomUUID();
    const data = events.map((e, i) => toEventData(e, i === events.length - 1 ? appendId : undefined));
    let reply: Awaited<ReturnType<EventStoreDBClient['appendToStream']>>;
    try {
      reply = await client.appendToStream(streamId, data, { expectedRevision: toEsdbExpectedRevision(expected) });
    } catch (err) {
      if (isWrongExpectedVersion(err)) return explainRefusal(streamId, events, expected, currentRevision(err.actualVersion), err);
      throw appendRefusal(streamId, err);
    }
    // A client built with throwOnAppendFailure: false reports a conflict here instead of throwing
    // (and v6's batch append then misreports the stream's revision, so look it up).
    if (!reply.success) return explainRefusal(streamId, events, expected, await streamRevision(streamId), undefined);
    // Where the batch must be: right after the expected revision. Only for 'any' is the server's
    // word needed (it reports the revision of the batch's last event, written or deduplicated).
    const lastRevision = expected === 'any' ? reply.nextExpectedRevision : (expected === 'no_stream' ? -1n : expected) + BigInt(events.length);
    return confirm(streamId, events, lastRevision, appendId);
  }

  async function readStream(streamId: string, o: { fromRevision?: bigint; limit?: number } = {}): Promise<StoredEvent[]> {
    const fromRevision = o.fromRevision ?? 0n;
    if (fromRevision < 0n) throw new BatonError(`readStream ${streamId}: fromRevision must be >= 0`);
    if (o.limit !== undefined && o.limit < 1) return [];
    // From the leader, as the appends: a follower may not have the append this process just made (a load right after it would decide on a stale revision).
    const raw = await readRaw(streamId, fromRevision, o.limit, true);
    return raw.map(toStoredEvent).filter((e): e is StoredEvent => e !== null);
  }

  async function readAll(o: ReadAllOptions): Promise<StoredEvent[]> {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new BatonError('readAll: limit must be a positive integer');
    streamFilterFor(o.streamPrefixes); // validates the prefixes
    const out: StoredEvent[] = [];
    let from = o.after;
    // The read includes the event at `from`, hence the + 1; later pages go at full size because
    // the wanted streams may be sparse in $all.
    let size = Math.min(o.limit + 1, pageSize + 1);
    for (;;) {
      const page: AllStreamResolvedEvent[] = [];
      for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: readPositionAfter(from), maxCount: size })) page.push(resolved);
      let last = from;
      for (const resolved of page) {
        if (!resolved.event) continue;
        const position = globalPositionOf(resolved);
        if (!isPast(position, from)) continue;
        last = position;
        if (!wanted(resolved.event.streamId, o.streamPrefixes)) continue;
        const stored = toStoredEvent(resolved);
        if (stored) out.push(stored);
        if (out.length === o.limit) return out;
      }
      if (page.length < size || last === from) return out; // the end of $all
      from = last;
      size = pageSize + 1;
    }
  }

  async function* subscribe(o: SubscribeOptions): AsyncGenerator<StoredEvent> {
    const f = streamFilterFor(o.streamPrefixes);
    const filter = 'regex' in f ? streamNameFilter({ regex: f.regex }) : streamNameFilter({ prefixes: f.prefixes });
    // Both orders are one here ($all is served in commit order as it commits); a `stream`
    // subscriber's resume point is simply the last event it handled.
    const resume = o.order === 'stream' ? o.resume : undefined;
    let after = typeof resume?.state === 'bigint' ? resume.state : o.after;
    readPositionAfter(after); // validates
    const stopped = () => o.signal?.aborted === true || closing.signal.aborted;
    // close() ends the subscriptions open then; a new one on a closed store is refused, not ended
    // at once as if done: a caller that subscribes again would spin without yielding to timers or I/O.
    if (closing.signal.aborted && o.signal?.aborted !== true) throw new BatonError('subscribe: the EventStoreDB event store is closed');
    let attempt = 0;
    while (!stopped()) {
      const subscription = client.subscribeToAll({ fromPosition: readPositionAfter(after), filter });
      const stop = () => {
        subscription.destroy();
        void subscription.unsubscribe().catch(() => undefined);
      };
      o.signal?.addEventListener('abort', stop, { once: true });
      closing.signal.addEventListener('abort', stop, { once: true });
      // A subscription the server confirmed and kept for a while means it is back: the next drop
      // starts the backoff afresh (one dropped right after its confirmation keeps backing off).
      let confirmedAt: number | undefined;
      subscription.on('confirmation', () => (confirmedAt = performance.now()));
      let failure: unknown = new Error('EventStoreDB ended the subscription');
      try {
        for await (const resolved of subscription as AsyncIterable<AllStreamResolvedEvent>) {
          if (!resolved.event) continue;
          const position = globalPositionOf(resolved);
          if (!isPast(position, after)) continue; // resuming: the event at the checkpoint itself
          after = position;
          attempt = 0; // progress: the connection works
          const stored = wanted(resolved.event.streamId, o.streamPrefixes) ? toStoredEvent(resolved) : null;
          if (stored) {
            yield stored;
            if (resume) resume.state = stored.globalPosition; // handled: the subscriber asked for the next
          }
          if (stopped()) return;
        }
      } catch (err) {
        failure = err;
      } finally {
        o.signal?.removeEventListener('abort', stop);
        closing.signal.removeEventListener('abort', stop);
        stop();
      }
      if (stopped()) return;
      if (isPermanentSubscriptionError(failure)) throw failure;
      if (confirmedAt !== undefined && performance.now() - confirmedAt >= HEALTHY_AFTER_MS) attempt = 0;
      attempt++;
      const delayMs = reconnectDelay(attempt, backoff);
      log?.warn({ err: failure, after: after.toString(), attempt, delayMs }, 'EventStoreDB subscription dropped; resubscribing from the last position seen');
      await sleep(delayMs, AbortSignal.any([closing.signal, ...(o.signal ? [o.signal] : [])]));
    }
  }

  async function deleteStream(streamId: string, o: { expectedRevision: bigint }): Promise<{ deleted: number }> {
    const current = await streamRevision(streamId);
    if (current === 'no_stream') return { deleted: 0 };
    if (current !== o.expectedRevision) throw toWrongExpectedRevision(streamId, o.expectedRevision, current);
    try {
      await client.tombstoneStream(streamId, { expectedRevision: o.expectedRevision });
    } catch (err) {
      if (isStreamNotFound(err)) return { deleted: 0 }; // deleted meanwhile (a retry)
      if (isWrongExpectedVersion(err)) throw toWrongExpectedRevision(streamId, o.expectedRevision, err.actualVersion, err);
      throw err;
    }
    // Revisions are never truncated here (Baton sets no $maxCount/$tb), so the count is revision + 1.
    return { deleted: Number(current + 1n) };
  }

  return {
    client,
    append,
    deleteStream,
    deletedStreamsStayInReadAll: true, // until a scavenge
    ...(options.snapshots && { snapshots: options.snapshots }),
    // EventStoreDB has no transaction across streams: each request is atomic on its own stream.
    appendMany: (requests) => appendEach(append, requests),
    readStream,
    readAll,
    subscribe,
    async close() {
      closing.abort();
      if (owned) await client.dispose();
    },
  };
}
