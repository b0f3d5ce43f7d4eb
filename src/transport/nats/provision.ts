// Provisioning for the NATS work transport: the work stream, the dead-letter stream and the
// durable consumers, created when missing and brought up to this transport's configuration
// when they exist (idempotent, safe to race with other processes doing the same).
//
// Consumers of worker ids that are gone: each durable carries an inactive threshold
// (consumerInactiveThresholdMs, default 1 h), after which the server deletes it. A live consumer
// is never inactive: it always holds a pull request open (renewed every PULL_EXPIRES_MS), so only
// a worker id with no process for that long loses its consumer, and a consume() for it recreates
// it (deliver-all: whatever is still on its subjects is delivered). Autoscaled workers with fresh
// ids otherwise leave one durable each behind for good. One hour is far past any restart,
// deploy or partition a worker comes back from, so a returning worker finds its consumer (with
// its delivery counts) in place; the executor has long reclaimed what a worker gone that long held.
// (What such a worker left unacked on its subjects is purged by the dead-letter sweep:
// ./dead-letters.ts.)
import { AckPolicy, DeliverPolicy, DiscardPolicy, nanos, RetentionPolicy, StorageType } from 'nats';
import type { ConsumerConfig, ConsumerInfo, StreamConfig } from 'nats';
import { BatonError } from '../../errors.ts';
import { apiErrorCode, JS_CONSUMER_ALREADY_EXISTS, JS_STREAM_NAME_IN_USE, JS_STREAM_NOT_FOUND, JS_STREAM_SUBJECT_OVERLAP, type NatsContext } from './context.ts';

/** The durable consumer every onDeadLetter subscriber of one dead-letter stream shares. */
export const DEAD_LETTER_CONSUMER = 'dead-letters';
// A subscriber's handler fails the execution in the event store: milliseconds. Past this the
// dead letter goes to another subscriber (the handler is idempotent).
const DEAD_LETTER_ACK_WAIT_MS = 30_000;

export interface Provisioning {
  /** The work stream, created or updated. */
  ensureStream(): Promise<void>;
  /** ensureStream for a publish that found the stream gone; shared by the publishes that find it at the same moment. */
  restoreStream(): Promise<void>;
  /** The dead-letter stream, created on first use (a transport that never sees a dead letter leaves nothing behind). */
  ensureDeadLetterStream(): Promise<void>;
  /** ensureDeadLetterStream after finding it gone: forgets that it was there. */
  restoreDeadLetterStream(): Promise<void>;
  /** The worker's durable pull consumer, created or updated to this transport's ack-wait / max-deliver / inactive threshold. */
  ensureConsumer(workerId: string): Promise<ConsumerInfo>;
  /** The onDeadLetter subscribers' shared durable consumer on the dead-letter stream. */
  ensureDeadLetterConsumer(): Promise<ConsumerInfo>;
}

export function createProvisioning({ jsm, settings }: NatsContext): Provisioning {
  const { streamName, prefix, deadLetterStream, deadLetterPrefix } = settings;

  const streamConfig: Partial<StreamConfig> = {
    name: streamName,
    subjects: [`${prefix}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(settings.duplicateWindowMs),
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
    duplicate_window: nanos(settings.duplicateWindowMs),
  };

  // Not found, or not known (the lookup failed too): the create's own error is the one to report.
  const streamExists = (name: string): Promise<boolean> =>
    jsm.streams.info(name).then(
      () => true,
      () => false,
    );

  /** Create a stream, or bring an existing one's config up to date (idempotent; safe to race). */
  async function addOrUpdateStream(config: Partial<StreamConfig>, shape: string, option: string): Promise<void> {
    try {
      await jsm.streams.add(config);
    } catch (err) {
      // A create racing another process's create of the same stream can be answered "subjects
      // overlap" rather than "name in use" (seen once in the fault suite): ours exists, so update it.
      const racedOurs = apiErrorCode(err) === JS_STREAM_SUBJECT_OVERLAP && (await streamExists(config.name!));
      if (apiErrorCode(err) !== JS_STREAM_NAME_IN_USE && !racedOurs) {
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

  let restoring: Promise<void> | undefined;
  const restoreStream = () =>
    (restoring ??= ensureStream().finally(() => {
      restoring = undefined;
    }));

  // Shared by concurrent first uses; forgotten on failure.
  let deadLetterStreamReady: Promise<void> | undefined;
  const ensureDeadLetterStream = (): Promise<void> =>
    (deadLetterStreamReady ??= addOrUpdateStream(deadLetterStreamConfig, `limits retention on ${deadLetterPrefix}.*`, 'deadLetterStreamName').catch(
      (err: unknown) => {
        deadLetterStreamReady = undefined;
        throw err;
      },
    ));
  const restoreDeadLetterStream = () => {
    deadLetterStreamReady = undefined;
    return ensureDeadLetterStream();
  };

  async function ensureConsumer(workerId: string): Promise<ConsumerInfo> {
    const config: Partial<ConsumerConfig> = {
      durable_name: settings.consumerName(workerId),
      filter_subject: settings.filterFor(workerId),
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(settings.ackWaitMs),
      max_deliver: settings.maxDeliver,
      inactive_threshold: nanos(settings.inactiveThresholdMs),
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
        return jsm.consumers.update(streamName, config.durable_name!, { ack_wait: config.ack_wait, max_deliver: settings.maxDeliver, inactive_threshold: config.inactive_threshold });
      }
      throw new BatonError(`cannot create JetStream consumer ${config.durable_name} on ${streamName}: ${(err as Error).message}`, { cause: err });
    }
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
        await restoreDeadLetterStream();
        return jsm.consumers.add(deadLetterStream, config);
      }
      if (apiErrorCode(err) === JS_CONSUMER_ALREADY_EXISTS) return jsm.consumers.update(deadLetterStream, DEAD_LETTER_CONSUMER, { ack_wait: config.ack_wait });
      throw new BatonError(`cannot create JetStream consumer ${DEAD_LETTER_CONSUMER} on ${deadLetterStream}: ${(err as Error).message}`, { cause: err });
    }
  }

  return { ensureStream, restoreStream, ensureDeadLetterStream, restoreDeadLetterStream, ensureConsumer, ensureDeadLetterConsumer };
}
