// Dead letters in the NATS work transport: how an exhausted message leaves the work stream.
// (Reading them back, onDeadLetter and the dead-letter list: ./dead-letter-queue.ts.)
//
// When a message reaches max-deliver, JetStream publishes the max-deliveries advisory
// ($JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>, with the message's stream
// sequence) and leaves the message in the work stream (work-queue retention keeps what was never
// acked). Whoever hears the advisory (every consumer watches its own worker's; every onDeadLetter
// subscriber watches all) moves it: reads it by sequence, publishes it to the dead-letter stream
// (default <stream>_DLQ, subject `<prefix>_dlq.<messageId>`: not under `<prefix>.>`, which the
// work stream owns), then deletes it from the work stream. The move is idempotent: the
// dead-letter publish carries Nats-Msg-Id `<messageId>:<work stream sequence>` and the
// dead-letter stream keeps one message per subject, so two movers, or a mover that died between
// the publish and the delete, leave one dead letter. onDeadLetter subscribers share one durable
// consumer on the dead-letter stream and ack after their handler resolves.
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
// What gone workers leave behind. Once a worker id has not pulled for consumerInactiveThresholdMs
// the server deletes its consumer (./provision.ts), and whatever that worker left unacked stays
// on its subjects for good: work-queue retention keeps a message until a consumer acks it, and
// the walk above, which goes by consumers, no longer sees it. So the sweep also purges every
// message on the subjects of a worker id that has no consumer, once it was stored longer ago
// than that threshold: no process of that worker pulled it for that long (or its consumer would
// exist), so the executor reclaimed its execution long ago (schedule-to-start, 30 s by default;
// the heartbeat timeout) and retried it elsewhere or gave up, by its rules. The event store, not
// this message, says what still has to run (and a handoff still waiting for its worker is
// re-published by the executor's monitor anyway). Purged, not dead-lettered: its delivery count
// went with the consumer, and it is no failure of its execution (a dead letter fails it). Each
// purge is logged with the message's ids. A message for a worker that has not consumed yet is
// kept until it is that old: its worker is starting, or never came.
import type { Subscription } from 'nats';
import { z } from 'zod';
import { repeatEvery, type Stoppable } from '../background.ts';
import { deadLetterReason, WorkMessageSchema } from '../internal.ts';
import type { WorkMessage } from '../work-transport.ts';
import { decoder, deleteStored, encoder, jsonOrUndefined, nextMessage, storedMessage, WORKER_CONSUMER_PREFIX, type NatsContext } from './context.ts';
import type { Provisioning } from './provision.ts';
import type { Publisher } from './publish.ts';

/** The dead-letter stream's message body: the port's DeadLetter without its cursor (the stream sequence). */
export const StoredDeadLetterSchema = z.object({
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

export interface DeadLetterMover {
  /** Listen for `consumer`'s max-deliveries advisories (`*`: every consumer's) until the returned function is called. */
  watchAdvisories(consumer: string): () => void;
  /** Sweep now and every deadLetterSweepMs, until stop(). */
  startSweeping(): Stoppable;
  /** Stop listening to advisories and wait for the moves in progress. */
  close(): Promise<void>;
}

export function createDeadLetterMover({ nc, jsm, settings, log }: NatsContext, provisioning: Provisioning, publisher: Publisher): DeadLetterMover {
  const { streamName } = settings;
  const moves = new Set<Promise<unknown>>();

  /** Run a move in the background; close() waits for it. Never rejects. */
  function track(what: string, task: Promise<unknown>): void {
    const p = task.catch((err: unknown) => log?.warn({ err }, `${what} failed; a later sweep moves what it missed`)).finally(() => moves.delete(p));
    moves.add(p);
  }

  /** Advisory subscriptions by consumer name (`*`: all), shared by the consumers and subscribers that want them. */
  const advisoryWatches = new Map<string, { sub: Subscription; users: number }>();
  function watchAdvisories(consumer: string): () => void {
    let watch = advisoryWatches.get(consumer);
    if (!watch) {
      const sub = nc.subscribe(settings.advisorySubject(consumer), {
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

  /**
   * Move the work stream's message `seq` to the dead letters; false when it is no longer there
   * (acked after all by a late handler, or moved by someone else).
   */
  async function moveToDeadLetters(seq: number, deliveries: number): Promise<boolean> {
    const sm = await storedMessage(jsm, streamName, { seq });
    if (!sm) return false;
    let message: WorkMessage;
    try {
      message = WorkMessageSchema.parse(JSON.parse(decoder.decode(sm.data)));
    } catch (err) {
      // Not Baton's: it cannot be retried either. Out of the way, with a trace in the log.
      log?.error({ err, streamSequence: seq, subject: sm.subject }, 'exhausted message is not a WorkMessage; deleted, not dead-lettered');
      await deleteStored(jsm, streamName, seq);
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
    await provisioning.ensureDeadLetterStream();
    await publisher.publishRestoring('dead letters', settings.deadLetterSubject(message.messageId), encoder.encode(JSON.stringify(body)), `${message.messageId}:${seq}`);
    await deleteStored(jsm, streamName, seq);
    log?.warn(
      { messageId: message.messageId, executionId: message.executionId, workerId: message.workerId, deliveries, streamSequence: seq },
      'message not acknowledged within max-deliver moved to the dead letters',
    );
    return true;
  }

  /** Move what the advisories did not, and purge what gone workers left (see the header for both). */
  async function sweep(signal: AbortSignal): Promise<void> {
    let moved = 0;
    const withConsumer = new Set<string>();
    for await (const ci of jsm.consumers.list(streamName)) {
      if (!ci.name.startsWith(WORKER_CONSUMER_PREFIX)) continue;
      withConsumer.add(ci.name);
      const last = ci.delivered.stream_seq;
      const filter = ci.config.filter_subject;
      if (signal.aborted || !filter || ci.num_ack_pending > 0 || last === 0) continue;
      for (let seq = 1; seq <= last && !signal.aborted; ) {
        const sm = await nextMessage(jsm, streamName, seq, filter);
        if (!sm || sm.seq > last) break;
        if (await moveToDeadLetters(sm.seq, ci.config.max_deliver && ci.config.max_deliver > 0 ? ci.config.max_deliver : settings.maxDeliver)) moved++;
        seq = sm.seq + 1;
      }
    }
    if (moved > 0) log?.info({ moved }, 'dead-letter sweep moved exhausted messages');
    if (!signal.aborted) await purgeLeftByGoneWorkers(withConsumer, signal);
  }

  /** Delete what waits on the subjects of worker ids without a consumer, once older than the inactive threshold. */
  async function purgeLeftByGoneWorkers(withConsumer: Set<string>, signal: AbortSignal): Promise<void> {
    // `<prefix>.<runtime>.<worker>`: exactly the work subjects, nothing else under the prefix.
    const si = await jsm.streams.info(streamName, { subjects_filter: `${settings.prefix}.*.*` });
    const storedBefore = Date.now() - settings.inactiveThresholdMs;
    let purged = 0;
    for (const subject of Object.keys(si.state.subjects ?? {})) {
      const workerToken = subject.slice(subject.lastIndexOf('.') + 1);
      if (withConsumer.has(`${WORKER_CONSUMER_PREFIX}${workerToken}`)) continue;
      for (let seq = 1; !signal.aborted; ) {
        const sm = await nextMessage(jsm, streamName, seq, subject);
        if (!sm || sm.time.getTime() > storedBefore) break; // in stream order: the rest are younger
        await deleteStored(jsm, streamName, sm.seq);
        purged++;
        const m = WorkMessageSchema.safeParse(jsonOrUndefined(sm.data));
        log?.warn(
          { ...(m.success && { messageId: m.data.messageId, executionId: m.data.executionId, workerId: m.data.workerId }), subject, streamSequence: sm.seq, storedAt: sm.time.toISOString() },
          'work message purged: its worker has had no consumer for longer than consumerInactiveThresholdMs (gone); the event store says what still has to run',
        );
        seq = sm.seq + 1;
      }
    }
    if (purged > 0) log?.info({ purged }, 'dead-letter sweep purged messages left by gone workers');
  }

  return {
    watchAdvisories,
    startSweeping: () => repeatEvery(settings.deadLetterSweepMs, sweep, 'dead-letter sweep failed; a later sweep moves what it missed', log),
    async close() {
      for (const { sub } of advisoryWatches.values()) sub.unsubscribe();
      advisoryWatches.clear();
      while (moves.size > 0) await Promise.all([...moves]);
    },
  };
}

