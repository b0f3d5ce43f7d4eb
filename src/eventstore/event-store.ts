// The EventStore port. Adapters: Postgres (default, ./postgres.ts); EventStoreDB/KurrentDB
// (./eventstoredb.ts, when BATON_EVENTSTORE_URL is set).
// Every adapter passes the one contract suite in test/contract/event-store.contract.ts.
import type { SnapshotStore } from './snapshots.ts';

/** An event as the caller hands it to append(). */
export interface NewEvent {
  /** Idempotency handle: appending the same eventIds again is a no-op that returns the first result. */
  eventId: string;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
}

export interface StoredEvent {
  eventId: string;
  streamId: string;
  /** 0-based position inside its stream; the fencing token for appends. */
  revision: bigint;
  /**
   * Position across all streams. Unique; pass it back as `after` to resume readAll/subscribe
   * right after this event. Delivery order is the store's commit order, which for Postgres is
   * not always numeric order of this value (see postgres.ts), so never compare two positions
   * numerically to decide which came first.
   */
  globalPosition: bigint;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  recordedAt: Date;
}

/**
 * `no_stream`: the stream must not exist yet. A bigint: the stream's last revision must be
 * exactly this. `any`: no check (use only for streams with a single writer).
 */
export type ExpectedRevision = bigint | 'no_stream' | 'any';

export interface AppendResult {
  /** Revision of the last event appended (the stream's new revision). */
  nextExpectedRevision: bigint;
  /** Global position of the last event appended. */
  lastPosition: bigint;
  /** True when every event was already stored by an earlier identical append. */
  idempotentReplay: boolean;
}

/** Resume point for readAll/subscribe: the globalPosition of the last event seen, or START. */
export const START = 0n;

export interface ReadAllOptions {
  /** Deliver events after the event at this position; START (0n) for the beginning. */
  after: bigint;
  limit: number;
  /** Only streams whose id starts with one of these prefixes. */
  streamPrefixes?: string[];
}

/**
 * What a subscriber needs of the order across streams.
 * - `global` (the default): every event once, in the store's commit order (readAll's), without
 *   gaps, so one position is a complete checkpoint. On Postgres that means waiting until every
 *   older transaction on the server has ended (the snapshot horizon): a write transaction held
 *   open anywhere on the server, even in another database, holds delivery back until it ends.
 *   For consumers that checkpoint a single position: the projector.
 * - `stream`: every event once and each stream's events in revision order, delivered as soon as
 *   its transaction commits, without waiting on other transactions; events of different streams
 *   may come in another order than readAll's, though never before an event whose transaction
 *   committed before theirs began. For consumers that keep state per stream: the
 *   executor's and orchestrator's follower, a wait for one execution. Resume with `resume`.
 * EventStoreDB serves $all in commit order as soon as it is committed: both are the same there.
 */
export type SubscriptionOrder = 'global' | 'stream';

/**
 * Where a `stream`-order subscription is, kept current by the adapter at the end of each batch
 * it delivered (once the subscriber asked for the next event). Pass the same object to the next
 * subscribe (after a failure) to go on exactly after the last batch handled; `after` is then
 * ignored. Opaque (EventStoreDB keeps the last event handled there).
 */
export interface SubscriptionResume {
  state?: unknown;
}

export interface SubscribeOptions {
  /** Start after this position: one readAll (or a `global` subscription) delivered, or START. */
  after: bigint;
  streamPrefixes?: string[];
  signal?: AbortSignal;
  /** Read batch size while catching up. */
  batchSize?: number;
  /** Default `global`. */
  order?: SubscriptionOrder;
  /** `stream` order only: see SubscriptionResume. */
  resume?: SubscriptionResume;
  /**
   * `stream` order only: appenders whose appends do not wake this subscription (see AppendOrigin).
   * Measured in `baton bench` (20,000 executions, the hosts' follower fed by the runtime that made
   * nearly every append): 2,000 reads of the store became ~450.
   */
  appliedBy?: ReadonlySet<AppendOrigin>;
  /**
   * Least time between two reads of the store once caught up (Postgres `global` order; other
   * stores may ignore it): a follower that tolerates this much extra delay (the projector) then
   * reads less often under load, in larger batches. A read after a quiet spell is not delayed.
   */
  minReadIntervalMs?: number;
  /**
   * Postgres `global` order: once caught up, a read woken after the store was idle waits this long
   * first, so that what the waking append sets off (an executor's handoff, a worker's start, a
   * fast run's outcome) is read in the same batch and the read stays off that path (the projector,
   * SETTLE_MS). Other stores may ignore it.
   */
  settleMs?: number;
}

/**
 * Who appends, for wake-ups inside this process only: an opaque token (each actor runtime has
 * one, `ActorRuntime.origin`). A `stream` subscription that lists it in `appliedBy` is not woken by
 * that appender's commits, because the appender applies its own events to what the subscriber
 * keeps. The Postgres store also leaves out of its reads the rows of transactions that appender
 * alone committed (pg-own-commits.ts); other stores deliver them with the next read anything else
 * wakes it for or at its idle poll, and the subscriber finds them applied. Nothing else changes:
 * other subscriptions and other processes are woken as always. Stores that push events
 * (EventStoreDB) ignore it.
 */
export type AppendOrigin = object;

/** Who appends and who waits for it: how an append wakes subscribers (options of append and appendMany). */
export interface AppendNotice {
  /** See AppendOrigin. */
  origin?: AppendOrigin;
  /**
   * Whether another process is likely waiting to act on these events (default true), as an
   * executor waits for a submit. The Postgres store then tells other processes inside a lone
   * append's own commit (its NOTIFY in the statement: no round trip of its own on their way).
   * False tells them just after the commit instead, which keeps the NOTIFY's commit-time work
   * (a cluster-wide lock, a signal to every listening backend) off the appender's own path: an
   * executor's handoff, whose next step is a worker of its own process or its transport publish.
   * Stores that push events (EventStoreDB) ignore it.
   */
  othersWait?: boolean;
}

export interface AppendOptions extends AppendNotice {
  expectedRevision: ExpectedRevision;
}

/** One stream's part of an appendMany. */
export interface AppendRequest {
  streamId: string;
  events: NewEvent[];
  expectedRevision: ExpectedRevision;
}

/** What became of one request of an appendMany: stored (or recognised as an earlier identical append), or refused. */
export type AppendOutcome = { ok: true; result: AppendResult } | { ok: false; error: Error };

export interface EventStore {
  /** Append a batch to one stream atomically, if it is at `expectedRevision`. */
  append(streamId: string, events: NewEvent[], options: AppendOptions): Promise<AppendResult>;
  /**
   * Appends to many streams, each with its own expected revision and its own outcome, in the
   * requests' order: a request that conflicts (WrongExpectedRevisionError, DuplicateEventIdError)
   * is reported, the others are stored, and a retry of an append already stored is recognised
   * as with append(). Invalid requests (validation) are outcomes too. How atomic a batch is
   * depends on the adapter: see its header.
   */
  appendMany(requests: readonly AppendRequest[], options?: AppendNotice): Promise<AppendOutcome[]>;
  /** Read one stream forward from a revision (inclusive). Empty for a stream that does not exist. */
  readStream(streamId: string, options?: { fromRevision?: bigint; limit?: number }): Promise<StoredEvent[]>;
  /**
   * Read all streams in commit order, never skipping an event that commits late. An event just
   * appended may not be returned yet: it is delivered once every older transaction has finished
   * (Postgres; see postgres.ts). Follow with subscribe() to see everything as it becomes safe.
   */
  readAll(options: ReadAllOptions): Promise<StoredEvent[]>;
  /**
   * When the first event after `after` (in readAll's order, of these stream prefixes) was
   * recorded, whether or not readAll delivers it yet; undefined when there is none. A Postgres
   * store holds back what committed behind an older transaction still open anywhere on the
   * server, so a lag measured from readAll alone read 0 while a projection fell behind.
   * Absent where readAll never holds events back (EventStoreDB): readAll tells the same there.
   */
  oldestCommittedAfter?(after: bigint, streamPrefixes?: readonly string[]): Promise<Date | undefined>;
  /**
   * Resolves once readAll returns everything committed before the call (Postgres: once every
   * transaction running on the server then has ended). One-shot readers of the whole store (copy,
   * verify, replay) call it first, so an unrelated open transaction cannot end their read early.
   * Absent where readAll never holds events back (EventStoreDB).
   */
  settled?(o?: { timeoutMs?: number }): Promise<void>;
  /** Catch up from a position, then follow live appends until the signal aborts. */
  subscribe(options: SubscribeOptions): AsyncIterable<StoredEvent>;
  /**
   * Remove a whole stream (retention, after its history was archived), if it is at
   * `expectedRevision` (WrongExpectedRevisionError otherwise, and nothing is removed); returns
   * how many events were removed (0 for a stream that does not exist: a retry is harmless).
   * Readers that checkpointed one of its events resume where they were. What the adapter
   * reclaims, and whether the id can be used again, is said in its header.
   */
  deleteStream(streamId: string, options: { expectedRevision: bigint }): Promise<{ deleted: number }>;
  /**
   * True when a deleted stream's events still come in reads of all streams until the server
   * reclaims them (EventStoreDB before a scavenge): a rebuild of the read model then leaves out
   * the streams retention archived (src/readmodel/build.ts).
   */
  readonly deletedStreamsStayInReadAll?: boolean;
  /** Where snapshots of long streams are kept (./snapshots.ts); absent when this store has none. */
  readonly snapshots?: SnapshotStore;
  /**
   * Make the connections a host is about to use ready, writing nothing, so that its first
   * executions run as fast as the rest (the Postgres store prepares its statements: postgres.ts).
   * Absent where there is nothing to prepare.
   */
  warmUp?(): Promise<void>;
  /**
   * Events another process (or another store instance) just committed, heard with its wake-up
   * before any read: a head start for a `stream`-order follower, which may apply them at once if
   * they follow what it holds, and still reads them (and every other event) as before. Only some
   * appends are heard (the Postgres store's lone appends whose events fit in a NOTIFY); order
   * across calls is not guaranteed. Absent where a store has no such channel. Returns the
   * unsubscribe.
   */
  onAppendHeard?(listener: (events: StoredEvent[]) => void): () => void;
  close(): Promise<void>;
}
