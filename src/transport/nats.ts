// The NATS JetStream WorkTransport (production).
//
// One durable work-queue stream (default BATON_WORK) holds every message on subject
// `<prefix>.<runtime>.<workerId>` until it is acked. Each worker id has one durable pull consumer,
// `worker-<workerId>`, filtered to `<prefix>.*.<workerId>`: every consumer of that worker id (one
// per process, or several) pulls from it, so JetStream hands each message to one of them at a
// time, redelivers after ack-wait, honours nak delays and stops at max-deliver.
//
// Dead letters. When a message reaches max-deliver, JetStream publishes the max-deliveries
// advisory ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>, with the message's
// stream sequence) and leaves the message in the work stream (work-queue retention keeps what was
// never acked). Whoever hears the advisory (every consumer watches its own worker's; every
// onDeadLetter subscriber watches all) moves it: reads it by sequence, publishes it to the
// dead-letter stream (default <stream>_DLQ, subject `<prefix>_dlq.<messageId>`: not under
// `<prefix>.>`, which the work stream owns), then deletes it from the work stream. The move is
// idempotent: the dead-letter publish carries Nats-Msg-Id `<messageId>:<work stream sequence>`
// and the dead-letter stream keeps one message per subject, so two movers, or a mover that died
// between the publish and the delete, leave one dead letter. onDeadLetter subscribers share one
// durable consumer on the dead-letter stream and ack after their handler resolves.
//
// Advisories are plain NATS messages: one published while nobody listens is gone. So subscribers
// also sweep, at start and every deadLetterSweepMs: for each worker consumer with nothing awaiting
// an ack, every message of its subjects at or below its delivered sequence that is still in the
// stream must be exhausted (acked and terminated ones are deleted by work-queue retention), and
// is moved. The gap (the server tells no per-message delivery counts): while a consumer still
// has unacked messages the sweep cannot tell its exhausted ones from those in flight, and skips
// it until it is idle. And JetStream only notices exhaustion when that consumer is pulled from
// again: a last delivery whose ack-wait ran out after its worker stopped pulling for good stays
// in the work stream and never becomes a dead letter here. The execution is not stuck by it: the
// executor's lease expiry retries it from the event store.
//
// Publishing is idempotent: `Nats-Msg-Id` = messageId, deduplicated by the stream within its
// duplicate window (default 2 min). Publishes are pipelined, PUBLISH_WINDOW in flight; measured
// here (2 cores, nats-server 2.9): sequential publish-with-ack 4,035 msgs/s, 256 in flight 22,671.
//
// Consumers of worker ids that are gone: each durable carries an inactive threshold
// (consumerInactiveThresholdMs, default 1 h), after which the server deletes it. A live consumer
// is never inactive: it always holds a pull request open (renewed every PULL_EXPIRES_MS), so only
// a worker id with no process for that long loses its consumer, and a consume() for it recreates
// it (deliver-all: whatever is still on its subjects is delivered). Autoscaled workers with fresh
// ids otherwise leave one durable each behind for good. One hour is far past any restart,
// deploy or partition a worker comes back from, so a returning worker finds its consumer (with
// its delivery counts) in place; the executor has long reclaimed what a worker gone that long held.
//
// Pulling: a consumer never asks for more messages than it has free handler slots. It keeps
// `inFlight + requested <= concurrency`, where `requested` is what its open fetches may still
// deliver, and opens another fetch for the free slots when there are at least a quarter of
// `concurrency` of them (or nothing is requested at all), so a busy consumer pulls in batches
// and an idle one holds one long-poll fetch open (PULL_EXPIRES_MS, with server heartbeats).
// Buffering more (consume() with its own refill) would start ack-wait clocks on messages no
// handler has, and starve the other consumers of the same worker.
//
// Worker signals (sendSignal / onSignal) are core NATS, not JetStream: a plain publish on
// `<prefix>_signal.<workerId>` (a sibling of the work subjects, like the dead letters, so no
// stream stores them), and a plain subscription per onSignal, so every subscription of a worker
// id gets each signal. Nobody listening is not an error. sendSignal flushes: it resolves once the
// server has the message. A signal sent while a subscriber is disconnected is lost; the sender
// rings again.
//
// NATS is a doorbell, not a record: a message lost here is re-published from the event store.
import { connect, AckPolicy, DeliverPolicy, DiscardPolicy, ErrorCode, Events, nanos, RetentionPolicy, StorageType, NatsError } from 'nats';
import type {
  ConsumerConfig,
  ConsumerInfo,
  ConsumerMessages,
  Consumer as JsConsumer,
  JetStreamManager,
  JsMsg,
  MsgRequest,
  NatsConnection,
  StoredMsg,
  StreamConfig,
  Subscription,
} from 'nats';
import type { Logger } from 'pino';
import { z } from 'zod';
import { BatonError, ConfigError, NotFoundError } from '../errors.ts';
import { redactUrl } from '../db/connect.ts';
import {
  compileTransportOptions,
  deadLetterReason,
  decodeSignal,
  deliverSignal,
  encodeSignal,
  deadLetterRetryDelayMs,
  HandlerSlots,
  positiveInteger,
  runDelivery,
  validateConsume,
  validateDeadLetterHandler,
  validateForPublish,
  validateListDeadLetters,
  validateMessageId,
  validateSignalSubscription,
  WorkMessageSchema,
  type Settlement,
} from './internal.ts';
import type {
  ConsumeOptions,
  Consumer,
  DeadLetter,
  DeadLetterSubscription,
  Delivery,
  ListDeadLettersOptions,
  SignalSubscription,
  WorkerSignal,
  WorkMessage,
  WorkTransport,
  WorkTransportOptions,
} from './work-transport.ts';

export interface NatsWorkTransportOptions extends WorkTransportOptions {
  /** The work-queue stream. Default `BATON_WORK`. */
  streamName?: string;
  /** Subjects are `<subjectPrefix>.<runtime>.<workerId>`. Default `baton.work`. */
  subjectPrefix?: string;
  /** How long the stream remembers a messageId for dedupe (ms). Default 120,000. */
  duplicateWindowMs?: number;
  /** The dead-letter stream. Default `<streamName>_DLQ`. */
  deadLetterStreamName?: string;
  /** How often an onDeadLetter subscriber sweeps for exhausted messages whose advisory nobody heard (ms). Default 60,000. */
  deadLetterSweepMs?: number;
  /** The server deletes a worker's durable consumer after it had no pull request for this long (ms). Default 3,600,000 (1 h). */
  consumerInactiveThresholdMs?: number;
  log?: Logger;
}

export const DEFAULT_STREAM_NAME = 'BATON_WORK';
export const DEFAULT_SUBJECT_PREFIX = 'baton.work';
export const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
export const DEFAULT_CONSUMER_INACTIVE_THRESHOLD_MS = 3_600_000;

const PUBLISH_WINDOW = 256;
// How long an idle fetch waits at the server before it is renewed. The client's default (30 s);
// the server sends idle heartbeats every 15 s meanwhile, so a dead connection is noticed.
const PULL_EXPIRES_MS = 30_000;
const MAX_ERROR_BACKOFF_MS = 5_000;
const FLUSH_TIMEOUT_MS = 2_000;

// JetStream API error codes (nats-server's errors.json).
const JS_STREAM_NOT_FOUND = 10059;
const JS_CONSUMER_NOT_FOUND = 10014;
const JS_STREAM_NAME_IN_USE = 10058; // exists with a different configuration
const JS_CONSUMER_ALREADY_EXISTS = 10148; // 2.10+: create refused because the config differs
const JS_NO_MESSAGE_FOUND = 10037;
const JS_SEQUENCE_NOT_FOUND = 10043; // deleting a message that is already gone

/** The durable consumer every onDeadLetter subscriber of one dead-letter stream shares. */
const DEAD_LETTER_CONSUMER = 'dead-letters';
// A subscriber's handler fails the execution in the event store: milliseconds. Past this the
// dead letter goes to another subscriber (the handler is idempotent).
const DEAD_LETTER_ACK_WAIT_MS = 30_000;
const DEAD_LETTER_BATCH = 8;
export const DEFAULT_DEAD_LETTER_SWEEP_MS = 60_000;

/** The dead-letter stream's message body: the port's DeadLetter without its cursor (the stream sequence). */
const StoredDeadLetterSchema = z.object({
  messageId: z.string(),
  message: WorkMessageSchema,
  workerId: z.string(),
  deliveries: z.number().int().positive(),
  deadLetteredAt: z.iso.datetime({ offset: true }),
  reason: z.string(),
});
type StoredDeadLetter = z.infer<typeof StoredDeadLetterSchema>;

/** The max-deliveries advisory's fields Baton reads (io.nats.jetstream.advisory.v1.max_deliver). */
const MaxDeliverAdvisorySchema = z.object({
  stream: z.string(),
  consumer: z.string(),
  stream_seq: z.number().int().positive(),
  deliveries: z.number().int().positive(),
});

const STREAM_NAME = /^[A-Za-z0-9_-]+$/;
const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A subject token (and consumer-name part) for any id: letters, digits, `_` and `-` are kept,
 * every other character becomes ~XX per UTF-8 byte. Distinct ids stay distinct, and no id can
 * smuggle a `.`, `*` or `>` into a subject. Not `%XX`: nats-server 2.9 formats the ack reply
 * subject with the consumer name inside a printf format, so a `%` in a consumer name corrupts
 * every delivery's reply subject and the client's parser drops the connection (seen here).
 */
export function subjectToken(id: string): string {
  return id.replace(/[^A-Za-z0-9_-]/gu, (c) =>
    [...encoder.encode(c)].map((b) => `~${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );
}

/** nc.flush(), but never longer than `ms`: a dead connection must not hang stop() or close(). */
async function flushWithin(nc: NatsConnection, ms: number): Promise<void> {
  if (nc.isClosed()) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    nc.flush().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** Resolves after `ms`, or at once when the signal aborts. */
function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

const apiErrorCode = (err: unknown): number | undefined => (err instanceof NatsError ? err.api_error?.err_code : undefined);

/** Connect to NATS for Baton: reconnect forever, log connection state changes. The caller closes it. */
export async function connectNats(url: string, log?: Logger): Promise<NatsConnection> {
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: url, name: 'baton', maxReconnectAttempts: -1, timeout: 5_000 });
  } catch (err) {
    throw new BatonError(`cannot connect to NATS at ${redactUrl(url)} (BATON_NATS_URL): ${(err as Error).message}`, { cause: err });
  }
  if (log) {
    const nlog = log.child({ component: 'nats' });
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect || s.type === Events.Error) nlog.warn({ status: s.type, data: String(s.data) }, 'NATS connection status');
        else if (s.type === Events.Reconnect) nlog.info({ status: s.type, data: String(s.data) }, 'NATS reconnected');
      }
    })().catch(() => undefined);
  }
  return nc;
}

export async function createNatsWorkTransport(nc: NatsConnection, options: NatsWorkTransportOptions = {}): Promise<WorkTransport> {
  const { ackWaitMs, maxDeliver } = compileTransportOptions(options);
  const streamName = options.streamName ?? DEFAULT_STREAM_NAME;
  const prefix = options.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX;
  const duplicateWindowMs = positiveInteger('duplicateWindowMs', options.duplicateWindowMs, DEFAULT_DUPLICATE_WINDOW_MS);
  if (!STREAM_NAME.test(streamName)) throw new ConfigError(`streamName must match ${STREAM_NAME}, got ${JSON.stringify(streamName)}`);
  if (!SUBJECT_PREFIX.test(prefix)) throw new ConfigError(`subjectPrefix must be dot-separated tokens of [A-Za-z0-9_-] (no wildcards), got ${JSON.stringify(prefix)}`);
  const deadLetterStream = options.deadLetterStreamName ?? `${streamName}_DLQ`;
  const deadLetterSweepMs = positiveInteger('deadLetterSweepMs', options.deadLetterSweepMs, DEFAULT_DEAD_LETTER_SWEEP_MS);
  const inactiveThresholdMs = positiveInteger('consumerInactiveThresholdMs', options.consumerInactiveThresholdMs, DEFAULT_CONSUMER_INACTIVE_THRESHOLD_MS);
  if (!STREAM_NAME.test(deadLetterStream)) throw new ConfigError(`deadLetterStreamName must match ${STREAM_NAME}, got ${JSON.stringify(deadLetterStream)}`);
  if (deadLetterStream === streamName) throw new ConfigError(`deadLetterStreamName must differ from streamName (${streamName})`);
  const log = options.log?.child({ component: 'work-transport', transport: 'nats', stream: streamName });

  let jsm: JetStreamManager;
  try {
    jsm = await nc.jetstreamManager();
  } catch (err) {
    throw new BatonError(`NATS at ${nc.getServer()} has no JetStream (start nats-server with -js): ${(err as Error).message}`, { cause: err });
  }
  const js = nc.jetstream();

  const consumerName = (workerId: string) => `worker-${subjectToken(workerId)}`;
  const filterFor = (workerId: string) => `${prefix}.*.${subjectToken(workerId)}`;
  const subjectFor = (m: WorkMessage) => `${prefix}.${subjectToken(m.runtime)}.${subjectToken(m.workerId)}`;
  // A sibling of the work subjects, not under them: the work stream owns `<prefix>.>`.
  const deadLetterPrefix = `${prefix}_dlq`;
  const deadLetterSubject = (messageId: string) => `${deadLetterPrefix}.${subjectToken(messageId.toLowerCase())}`;
  // Also a sibling: core NATS only, no stream may capture signals.
  const signalSubject = (workerId: string) => `${prefix}_signal.${subjectToken(workerId)}`;
  const advisorySubject = (consumer: string) => `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${streamName}.${consumer}`;

  const streamConfig: Partial<StreamConfig> = {
    name: streamName,
    subjects: [`${prefix}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(duplicateWindowMs),
  };

  // Kept until retried or deleted (limits retention, no limits); one message per subject, so
  // one dead letter per messageId whatever happened to the moves.
  const deadLetterStreamConfig: Partial<StreamConfig> = {
    name: deadLetterStream,
    subjects: [`${deadLetterPrefix}.*`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    duplicate_window: nanos(duplicateWindowMs),
  };

  /** Create a stream, or bring an existing one's config up to date (idempotent; safe to race). */
  async function addOrUpdateStream(config: Partial<StreamConfig>, shape: string, option: string): Promise<void> {
    try {
      await jsm.streams.add(config);
    } catch (err) {
      if (apiErrorCode(err) !== JS_STREAM_NAME_IN_USE) {
        throw new BatonError(`cannot create JetStream stream ${config.name} (subjects ${config.subjects!.join(', ')}): ${(err as Error).message}`, { cause: err });
      }
      try {
        await jsm.streams.update(config.name!, config);
      } catch (updateErr) {
        throw new BatonError(
          `JetStream stream ${config.name} exists with a configuration Baton cannot update to (${shape}): ` +
            `${(updateErr as Error).message}. Delete the stream or pick another ${option}.`,
          { cause: updateErr },
        );
      }
    }
  }

  const ensureStream = () => addOrUpdateStream(streamConfig, `work-queue retention on ${prefix}.>`, 'streamName');

  // The dead-letter stream is created on first use, so a transport that never sees a dead letter
  // leaves nothing behind. Shared by concurrent first uses; forgotten on failure.
  let deadLetterStreamReady: Promise<void> | undefined;
  const ensureDeadLetterStream = (): Promise<void> =>
    (deadLetterStreamReady ??= addOrUpdateStream(deadLetterStreamConfig, `limits retention on ${deadLetterPrefix}.*`, 'deadLetterStreamName').catch(
      (err: unknown) => {
        deadLetterStreamReady = undefined;
        throw err;
      },
    ));

  /** The worker's durable pull consumer, created or updated to this transport's ack-wait / max-deliver / inactive threshold. */
  async function ensureConsumer(workerId: string): Promise<ConsumerInfo> {
    const config: Partial<ConsumerConfig> = {
      durable_name: consumerName(workerId),
      filter_subject: filterFor(workerId),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ackWaitMs),
      max_deliver: maxDeliver,
      inactive_threshold: nanos(inactiveThresholdMs),
    };
    try {
      // Before 2.10 an add with a changed config updates it; from 2.10 it is refused, so update.
      return await jsm.consumers.add(streamName, config);
    } catch (err) {
      if (apiErrorCode(err) === JS_STREAM_NOT_FOUND) {
        await ensureStream();
        return ensureConsumer(workerId);
      }
      if (apiErrorCode(err) === JS_CONSUMER_ALREADY_EXISTS) {
        return jsm.consumers.update(streamName, config.durable_name!, { ack_wait: config.ack_wait, max_deliver: maxDeliver, inactive_threshold: config.inactive_threshold });
      }
      throw new BatonError(`cannot create JetStream consumer ${config.durable_name} on ${streamName}: ${(err as Error).message}`, { cause: err });
    }
  }

  await ensureStream();

  const consumers = new Set<Consumer>();
  let closed = false;
  let closing: Promise<void> | undefined;
  const assertOpen = (what: string) => {
    if (closed) throw new BatonError(`${what}: the NATS work transport is closed`);
  };

  // Shared by the publishes that find the stream gone at the same moment.
  let restoring: Promise<void> | undefined;
  const restoreStream = () =>
    (restoring ??= ensureStream().finally(() => {
      restoring = undefined;
    }));

  /**
   * js.publish, expecting `stream`. No responders means no stream takes the subject any more
   * (NATS lost its state, or the stream was deleted): recreate it once and retry; the dedupe id
   * keeps this idempotent.
   */
  async function publishRestoring(subject: string, data: Uint8Array, msgID: string, stream: string, restore: () => Promise<void>): Promise<void> {
    const send = () => js.publish(subject, data, { msgID, expect: { streamName: stream } });
    try {
      await send();
    } catch (err) {
      if (!(err instanceof NatsError && err.code === ErrorCode.NoResponders)) throw err;
      log?.warn({ err, missingStream: stream }, 'stream missing on publish; recreating it');
      await restore();
      await send();
    }
  }

  async function publish(messages: WorkMessage[]): Promise<void> {
    assertOpen('publish');
    validateForPublish(messages);
    let next = 0;
    const lane = async () => {
      while (next < messages.length) {
        const m = messages[next++]!;
        const subject = subjectFor(m);
        const data = encoder.encode(JSON.stringify(m));
        try {
          await publishRestoring(subject, data, m.messageId, streamName, restoreStream);
        } catch (err) {
          throw new BatonError(`publish of ${m.messageId} to ${subject} (stream ${streamName}) failed: ${(err as Error).message}`, { cause: err });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PUBLISH_WINDOW, messages.length) }, lane));
  }

  async function consume(workerId: string, handler: (delivery: Delivery) => Promise<void>, o: ConsumeOptions): Promise<Consumer> {
    assertOpen('consume');
    validateConsume(workerId, handler, o);
    const { concurrency } = o;
    const clog = log?.child({ workerId });
    let pull: JsConsumer = js.consumers.getPullConsumerFor(await ensureConsumer(workerId));
    // This consumer's pulls are what make JetStream give up on a message: hear it here.
    const unwatch = watchAdvisories(consumerName(workerId));
    const slots = new HandlerSlots();
    const batchThreshold = Math.max(1, Math.floor(concurrency / 4));
    const fetches = new Set<ConsumerMessages>();
    const loops = new Set<Promise<void>>();
    let requested = 0;
    let stopping = false;
    let backoffTimer: NodeJS.Timeout | undefined;
    let errorBackoffMs = 100;
    let recreate = false;

    const settlement = (m: JsMsg): Settlement => ({
      // Fire-and-forget, as JetStream acks are: a lost ack means one redelivery, which the
      // event store's fencing makes harmless. stop() and close() flush the connection.
      ack: async () => m.ack(),
      nak: async (delayMs) => (delayMs > 0 ? m.nak(delayMs) : m.nak()),
      term: async () => m.term(),
      working: async () => m.working(),
    });

    function dispatch(m: JsMsg): void {
      let message: WorkMessage;
      try {
        message = WorkMessageSchema.parse(JSON.parse(decoder.decode(m.data)));
      } catch (err) {
        // Redelivering it cannot help: terminate it, and say so.
        clog?.error(
          { err, subject: m.subject, streamSequence: m.seq, natsMsgId: m.headers?.get('Nats-Msg-Id') },
          'work message is not a valid WorkMessage; terminated',
        );
        m.term();
        queueMicrotask(pump);
        return;
      }
      slots.start(() => runDelivery(handler, message, m.info.deliveryCount, settlement(m), clog));
    }

    function pump(): void {
      if (stopping || backoffTimer || nc.isClosed()) return;
      const free = concurrency - slots.count - requested;
      if (free <= 0 || (requested > 0 && free < batchThreshold)) return;
      const loop = fetchBatch(free).finally(() => {
        loops.delete(loop);
        pump();
      });
      loops.add(loop);
    }

    function backOff(): void {
      if (stopping || backoffTimer) return;
      backoffTimer = setTimeout(() => {
        backoffTimer = undefined;
        pump();
      }, errorBackoffMs);
      errorBackoffMs = Math.min(errorBackoffMs * 2, MAX_ERROR_BACKOFF_MS);
    }

    async function fetchBatch(n: number): Promise<void> {
      requested += n;
      let received = 0;
      const started = performance.now();
      let failure: unknown;
      try {
        if (recreate) {
          // The consumer (or the whole stream) disappeared: NATS lost its state, or someone
          // deleted it. Recreate both; what was lost is re-published from the event store.
          pull = js.consumers.getPullConsumerFor(await ensureConsumer(workerId));
          recreate = false;
        }
        const batch = await pull.fetch({ max_messages: n, expires: PULL_EXPIRES_MS });
        fetches.add(batch);
        if (stopping) void batch.close();
        try {
          for await (const m of batch) {
            received++;
            if (received <= n) requested--;
            if (received > n || stopping) {
              // Not ours to handle (stopping, or more than asked for after a reset): give it back now.
              m.nak();
              continue;
            }
            dispatch(m);
          }
        } finally {
          fetches.delete(batch);
        }
      } catch (err) {
        failure = err;
      } finally {
        requested -= Math.max(0, n - received);
      }
      if (stopping) return;
      if (failure !== undefined) {
        recreate = true;
        clog?.warn({ err: failure, retryInMs: errorBackoffMs }, 'JetStream fetch failed; retrying');
        backOff();
      } else if (received === 0 && performance.now() - started < PULL_EXPIRES_MS * 0.9) {
        // Ended early with nothing (a 409 such as max-waiting): do not spin on it.
        clog?.debug({ retryInMs: errorBackoffMs }, 'JetStream fetch ended early without messages; backing off');
        backOff();
      } else {
        errorBackoffMs = 100;
      }
    }

    const offRelease = slots.onRelease(pump);
    pump();

    let stopped: Promise<void> | undefined;
    const consumer: Consumer = {
      stop: () =>
        (stopped ??= (async () => {
          stopping = true;
          clearTimeout(backoffTimer);
          backoffTimer = undefined;
          await Promise.all([...fetches].map((f) => f.close().catch(() => undefined)));
          await Promise.all([...loops]);
          await slots.drained();
          offRelease();
          await flushWithin(nc, FLUSH_TIMEOUT_MS); // the handlers' acks reach the server
          unwatch();
          consumers.delete(consumer);
        })()),
    };
    consumers.add(consumer);
    return consumer;
  }

  async function depth(workerId?: string): Promise<number> {
    if (workerId === undefined) return (await jsm.streams.info(streamName)).state.messages;
    try {
      const ci = await jsm.consumers.info(streamName, consumerName(workerId));
      return ci.num_pending + ci.num_ack_pending;
    } catch (err) {
      if (apiErrorCode(err) !== JS_CONSUMER_NOT_FOUND) throw err;
      // Nobody consumed for this worker yet: everything on its subjects is waiting.
      const si = await jsm.streams.info(streamName, { subjects_filter: filterFor(workerId) });
      return Object.values(si.state.subjects ?? {}).reduce((a, b) => a + b, 0);
    }
  }

  // ---- dead letters ----

  const moves = new Set<Promise<unknown>>();
  /** Run a move or sweep in the background; close() waits for it. Never rejects. */
  function track(what: string, task: Promise<unknown>): void {
    const p = task.catch((err: unknown) => log?.warn({ err }, `${what} failed; a later sweep moves what it missed`)).finally(() => moves.delete(p));
    moves.add(p);
  }

  /** Advisory subscriptions by consumer name (`*`: all), shared by the consumers and subscribers that want them. */
  const advisoryWatches = new Map<string, { sub: Subscription; users: number }>();
  function watchAdvisories(consumer: string): () => void {
    let watch = advisoryWatches.get(consumer);
    if (!watch) {
      const sub = nc.subscribe(advisorySubject(consumer), {
        callback: (err, msg) => {
          if (err) return log?.warn({ err }, 'max-deliveries advisory subscription failed');
          let advisory: z.infer<typeof MaxDeliverAdvisorySchema>;
          try {
            advisory = MaxDeliverAdvisorySchema.parse(JSON.parse(decoder.decode(msg.data)));
          } catch (parseErr) {
            return log?.warn({ err: parseErr, subject: msg.subject }, 'unreadable max-deliveries advisory ignored');
          }
          if (advisory.stream !== streamName) return;
          track('moving a dead letter', moveToDeadLetters(advisory.stream_seq, advisory.deliveries));
        },
      });
      watch = { sub, users: 0 };
      advisoryWatches.set(consumer, watch);
    }
    watch.users++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--watch.users === 0) {
        advisoryWatches.delete(consumer);
        watch.sub.unsubscribe();
      }
    };
  }

  /** getMessage, with "no such message" and "no such stream" as undefined. */
  async function storedMessage(stream: string, query: MsgRequest): Promise<StoredMsg | undefined> {
    try {
      return await jsm.streams.getMessage(stream, query);
    } catch (err) {
      const code = apiErrorCode(err);
      if (code === JS_NO_MESSAGE_FOUND || code === JS_STREAM_NOT_FOUND) return undefined;
      throw err;
    }
  }

  /**
   * The first message at or after `seq` on `subject` (wildcards allowed). nats-server 2.9+ takes
   * next_by_subj on STREAM.MSG.GET; nats.js 2.x types it only for the direct-get API (which needs
   * allow_direct on the stream), hence the cast.
   */
  const nextMessage = (stream: string, seq: number, subject: string) =>
    storedMessage(stream, { seq, next_by_subj: subject } as unknown as MsgRequest);

  async function deleteStored(stream: string, seq: number): Promise<void> {
    try {
      await jsm.streams.deleteMessage(stream, seq, false);
    } catch (err) {
      if (apiErrorCode(err) !== JS_SEQUENCE_NOT_FOUND) throw err; // gone already: someone else did it
    }
  }

  /** A dead-letter stream message (stored or delivered) as the port's DeadLetter; undefined (logged) when it is not one. */
  function decodeDeadLetter(m: { seq: number; subject: string; data: Uint8Array }): DeadLetter | undefined {
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(m.data));
    } catch {
      json = undefined;
    }
    const r = StoredDeadLetterSchema.safeParse(json);
    if (!r.success) {
      log?.error({ stream: deadLetterStream, streamSequence: m.seq, subject: m.subject }, 'message in the dead-letter stream is not a dead letter; skipped');
      return undefined;
    }
    return { ...r.data, cursor: String(m.seq) };
  }

  /**
   * Move the work stream's message `seq` to the dead letters; false when it is no longer there
   * (acked after all by a late handler, or moved by someone else).
   */
  async function moveToDeadLetters(seq: number, deliveries: number): Promise<boolean> {
    const sm = await storedMessage(streamName, { seq });
    if (!sm) return false;
    let message: WorkMessage;
    try {
      message = WorkMessageSchema.parse(JSON.parse(decoder.decode(sm.data)));
    } catch (err) {
      // Not Baton's: it cannot be retried either. Out of the way, with a trace in the log.
      log?.error({ err, streamSequence: seq, subject: sm.subject }, 'exhausted message is not a WorkMessage; deleted, not dead-lettered');
      await deleteStored(streamName, seq);
      return false;
    }
    const body: StoredDeadLetter = {
      messageId: message.messageId,
      message,
      workerId: message.workerId,
      deliveries,
      deadLetteredAt: new Date().toISOString(),
      reason: deadLetterReason(deliveries),
    };
    await ensureDeadLetterStream();
    await publishRestoring(deadLetterSubject(message.messageId), encoder.encode(JSON.stringify(body)), `${message.messageId}:${seq}`, deadLetterStream, () => {
      deadLetterStreamReady = undefined;
      return ensureDeadLetterStream();
    });
    await deleteStored(streamName, seq);
    log?.warn(
      { messageId: message.messageId, executionId: message.executionId, workerId: message.workerId, deliveries, streamSequence: seq },
      'message not acknowledged within max-deliver moved to the dead letters',
    );
    return true;
  }

  /** Move what the advisories did not (see the header for what this can and cannot find). */
  async function sweep(): Promise<number> {
    let moved = 0;
    for await (const ci of jsm.consumers.list(streamName)) {
      const last = ci.delivered.stream_seq;
      const filter = ci.config.filter_subject;
      if (!ci.name.startsWith('worker-') || !filter || ci.num_ack_pending > 0 || last === 0) continue;
      for (let seq = 1; seq <= last; ) {
        const sm = await nextMessage(streamName, seq, filter);
        if (!sm || sm.seq > last) break;
        if (await moveToDeadLetters(sm.seq, ci.config.max_deliver && ci.config.max_deliver > 0 ? ci.config.max_deliver : maxDeliver)) moved++;
        seq = sm.seq + 1;
      }
    }
    if (moved > 0) log?.info({ moved }, 'dead-letter sweep moved exhausted messages');
    return moved;
  }

  async function ensureDeadLetterConsumer(): Promise<ConsumerInfo> {
    await ensureDeadLetterStream();
    const config: Partial<ConsumerConfig> = {
      durable_name: DEAD_LETTER_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(DEAD_LETTER_ACK_WAIT_MS),
      max_deliver: -1, // a failing handler gets it again (after a back-off), for as long as it takes
    };
    try {
      return await jsm.consumers.add(deadLetterStream, config);
    } catch (err) {
      if (apiErrorCode(err) === JS_STREAM_NOT_FOUND) {
        deadLetterStreamReady = undefined;
        await ensureDeadLetterStream();
        return jsm.consumers.add(deadLetterStream, config);
      }
      if (apiErrorCode(err) === JS_CONSUMER_ALREADY_EXISTS) return jsm.consumers.update(deadLetterStream, DEAD_LETTER_CONSUMER, { ack_wait: config.ack_wait });
      throw new BatonError(`cannot create JetStream consumer ${DEAD_LETTER_CONSUMER} on ${deadLetterStream}: ${(err as Error).message}`, { cause: err });
    }
  }

  const subscriptions = new Set<DeadLetterSubscription>();

  async function onDeadLetter(handler: (deadLetter: DeadLetter) => Promise<void>): Promise<DeadLetterSubscription> {
    assertOpen('onDeadLetter');
    validateDeadLetterHandler(handler);
    const dlog = log?.child({ subscription: 'dead-letters' });
    let pull: JsConsumer = js.consumers.getPullConsumerFor(await ensureDeadLetterConsumer());
    const unwatch = watchAdvisories('*');
    track('dead-letter sweep', sweep());
    const sweepTimer = setInterval(() => track('dead-letter sweep', sweep()), deadLetterSweepMs);
    sweepTimer.unref();
    const stopping = new AbortController();
    let batch: ConsumerMessages | undefined;

    async function handle(m: JsMsg): Promise<void> {
      const deadLetter = decodeDeadLetter(m);
      if (!deadLetter) return m.term();
      const about = { messageId: deadLetter.messageId, executionId: deadLetter.message.executionId, workerId: deadLetter.workerId };
      try {
        await handler(deadLetter);
      } catch (err) {
        const retryInMs = deadLetterRetryDelayMs(m.info.deliveryCount);
        dlog?.warn({ err, ...about, retryInMs }, 'dead-letter handler failed; handing the dead letter over again later');
        return m.nak(retryInMs);
      }
      m.ack();
    }

    const loop = (async () => {
      let errorBackoffMs = 100;
      let recreate = false;
      while (!stopping.signal.aborted) {
        let received = 0;
        const started = performance.now();
        try {
          if (recreate) {
            pull = js.consumers.getPullConsumerFor(await ensureDeadLetterConsumer());
            recreate = false;
          }
          batch = await pull.fetch({ max_messages: DEAD_LETTER_BATCH, expires: PULL_EXPIRES_MS });
          if (stopping.signal.aborted) void batch.close();
          for await (const m of batch) {
            received++;
            if (stopping.signal.aborted) m.nak(); // not ours any more: to another subscriber now
            else await handle(m);
          }
        } catch (err) {
          if (stopping.signal.aborted) break;
          recreate = true;
          dlog?.warn({ err, retryInMs: errorBackoffMs }, 'dead-letter fetch failed; retrying');
        } finally {
          batch = undefined;
        }
        if (stopping.signal.aborted) break;
        if (!recreate && (received > 0 || performance.now() - started >= PULL_EXPIRES_MS * 0.9)) {
          errorBackoffMs = 100;
          continue;
        }
        await sleepUnlessAborted(errorBackoffMs, stopping.signal);
        errorBackoffMs = Math.min(errorBackoffMs * 2, MAX_ERROR_BACKOFF_MS);
      }
    })();

    let stopped: Promise<void> | undefined;
    const subscription: DeadLetterSubscription = {
      stop: () =>
        (stopped ??= (async () => {
          stopping.abort();
          clearInterval(sweepTimer);
          await batch?.close().catch(() => undefined);
          await loop;
          unwatch();
          await flushWithin(nc, FLUSH_TIMEOUT_MS); // the acks reach the server
          subscriptions.delete(subscription);
        })()),
    };
    subscriptions.add(subscription);
    return subscription;
  }

  async function listDeadLetters(o: ListDeadLettersOptions): Promise<DeadLetter[]> {
    const { limit, after } = validateListDeadLetters(o);
    const found: DeadLetter[] = [];
    // One request per dead letter, each for the next one after the last; a page is at most 1,000.
    for (let seq = Number(after) + 1; found.length < limit; ) {
      const sm = await nextMessage(deadLetterStream, seq, `${deadLetterPrefix}.*`);
      if (!sm) break;
      const deadLetter = decodeDeadLetter(sm);
      if (deadLetter) found.push(deadLetter);
      seq = sm.seq + 1;
    }
    return found;
  }

  async function storedDeadLetter(messageId: string): Promise<{ seq: number; deadLetter: DeadLetter } | undefined> {
    const sm = await storedMessage(deadLetterStream, { last_by_subj: deadLetterSubject(messageId) });
    const deadLetter = sm && decodeDeadLetter(sm);
    return deadLetter && { seq: sm.seq, deadLetter };
  }

  async function getDeadLetter(messageId: string): Promise<DeadLetter | undefined> {
    return (await storedDeadLetter(validateMessageId('getDeadLetter', messageId)))?.deadLetter;
  }

  async function retryDeadLetter(messageId: string): Promise<DeadLetter> {
    assertOpen('retryDeadLetter');
    const id = validateMessageId('retryDeadLetter', messageId);
    const found = await storedDeadLetter(id);
    if (!found) throw new NotFoundError('dead letter', id);
    const { message } = found.deadLetter;
    // Its own dedupe id: the original's may still be in the work stream's duplicate window, and a
    // retry that died before the delete below, retried, publishes once.
    await publishRestoring(subjectFor(message), encoder.encode(JSON.stringify(message)), `${message.messageId}:retry:${found.seq}`, streamName, restoreStream);
    await deleteStored(deadLetterStream, found.seq);
    log?.info({ messageId: id, executionId: message.executionId, workerId: message.workerId }, 'dead letter published again');
    return found.deadLetter;
  }

  async function deleteDeadLetter(messageId: string): Promise<DeadLetter> {
    const id = validateMessageId('deleteDeadLetter', messageId);
    const found = await storedDeadLetter(id);
    if (!found) throw new NotFoundError('dead letter', id);
    await deleteStored(deadLetterStream, found.seq);
    log?.info({ messageId: id, executionId: found.deadLetter.message.executionId }, 'dead letter deleted');
    return found.deadLetter;
  }

  // ---- worker signals ----

  async function sendSignal(workerId: string, signal: WorkerSignal): Promise<void> {
    assertOpen('sendSignal');
    const payload = encodeSignal(workerId, signal);
    const subject = signalSubject(workerId);
    let timer: NodeJS.Timeout | undefined;
    try {
      nc.publish(subject, encoder.encode(payload));
      // The server answers a flush's PING after it has taken everything before it.
      await Promise.race([
        nc.flush(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`not confirmed by NATS within ${FLUSH_TIMEOUT_MS} ms`)), FLUSH_TIMEOUT_MS);
        }),
      ]);
    } catch (err) {
      throw new BatonError(`sendSignal to worker ${workerId} (${subject}) failed: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  const signalSubscriptions = new Set<SignalSubscription>();

  async function onSignal(workerId: string, handler: (signal: WorkerSignal) => void): Promise<SignalSubscription> {
    assertOpen('onSignal');
    validateSignalSubscription(workerId, handler);
    let stopped = false;
    const sub = nc.subscribe(signalSubject(workerId), {
      callback: (err, msg) => {
        if (err) return log?.warn({ err, workerId }, 'worker signal subscription failed');
        if (stopped) return;
        const envelope = decodeSignal(decoder.decode(msg.data), log);
        // The subject names the worker; a body addressed to another is not this worker's.
        if (!envelope || envelope.workerId !== workerId) return;
        deliverSignal(handler, envelope, log);
      },
    });
    const subscription: SignalSubscription = {
      stop: async () => {
        if (stopped) return;
        stopped = true;
        signalSubscriptions.delete(subscription);
        sub.unsubscribe(); // a no-op once the connection is closed
      },
    };
    signalSubscriptions.add(subscription);
    // In place at the server once it answers the PING behind our SUB (a bounded wait: on a
    // dead connection the client subscribes again when it reconnects).
    await flushWithin(nc, FLUSH_TIMEOUT_MS);
    return subscription;
  }

  /**
   * Stops every consumer and dead-letter subscription (waiting for their handlers) and every
   * signal subscription, and flushes; the caller closes `nc`.
   */
  function close(): Promise<void> {
    closed = true;
    return (closing ??= (async () => {
      await Promise.all([...signalSubscriptions].map((s) => s.stop()));
      await Promise.all([...consumers].map((c) => c.stop()));
      await Promise.all([...subscriptions].map((s) => s.stop()));
      for (const { sub } of advisoryWatches.values()) sub.unsubscribe();
      advisoryWatches.clear();
      while (moves.size > 0) await Promise.all([...moves]);
      await flushWithin(nc, FLUSH_TIMEOUT_MS);
    })());
  }

  return {
    publish,
    consume,
    depth,
    onDeadLetter,
    listDeadLetters,
    getDeadLetter,
    retryDeadLetter,
    deleteDeadLetter,
    sendSignal,
    onSignal,
    close,
  };
}
