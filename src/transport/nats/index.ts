// The NATS JetStream WorkTransport (production), assembled from its parts.
//
// One durable work-queue stream (default BATON_WORK) holds every message on subject
// `<prefix>.<runtime>.<workerId>` until it is acked. Each worker id has one durable pull consumer,
// `worker-<workerId>`, filtered to `<prefix>.*.<workerId>`: every consumer of that worker id (one
// per process, or several) pulls from it, so JetStream hands each message to one of them at a
// time, redelivers after ack-wait, honours nak delays and stops at max-deliver.
//
// The parts, one concern each: ./provision.ts (streams and consumers, and why consumers of gone
// workers expire), ./publish.ts, ./consume.ts (pull flow control, on the shared ../pull-loop.ts),
// ./dead-letters.ts (advisories and sweeps: how exhausted messages become dead letters, and what
// gone workers left is purged), ./dead-letter-queue.ts (onDeadLetter and `baton dlq`),
// ./signals.ts (core NATS), and ./context.ts (options, names on the wire, JetStream helpers).
//
// NATS is a doorbell, not a record: a message lost here is re-published from the event store.
import type { NatsConnection } from 'nats';
import { BatonError } from '../../errors.ts';
import type { WorkTransport } from '../work-transport.ts';
import { createConsumers } from './consume.ts';
import { compileNatsOptions, FLUSH_TIMEOUT_MS, flushWithin, jetStreamOf, type NatsContext, type NatsWorkTransportOptions } from './context.ts';
import { createDeadLetterQueue } from './dead-letter-queue.ts';
import { createDeadLetterMover } from './dead-letters.ts';
import { createProvisioning } from './provision.ts';
import { createPublisher } from './publish.ts';
import { createSignals } from './signals.ts';
import { componentLogger } from '../../log.ts';

export { connectNats } from './connect.ts';
export {
  DEFAULT_CONSUMER_INACTIVE_THRESHOLD_MS,
  DEFAULT_DEAD_LETTER_SWEEP_MS,
  DEFAULT_DUPLICATE_WINDOW_MS,
  DEFAULT_STREAM_NAME,
  DEFAULT_SUBJECT_PREFIX,
  subjectToken,
  type NatsWorkTransportOptions,
} from './context.ts';

/**
 * Delete the streams a transport with these options made, the work stream and its dead-letter
 * stream (missing ones are skipped): for what made them for itself alone, a bench or a test run,
 * once it is done.
 */
export async function deleteNatsWorkStreams(nc: NatsConnection, options: Pick<NatsWorkTransportOptions, 'streamName' | 'deadLetterStreamName'>): Promise<void> {
  const { streamName, deadLetterStream } = compileNatsOptions(options);
  const jsm = await nc.jetstreamManager();
  for (const name of [streamName, deadLetterStream]) await jsm.streams.delete(name).catch(() => undefined);
}

export async function createNatsWorkTransport(nc: NatsConnection, options: NatsWorkTransportOptions = {}): Promise<WorkTransport> {
  const settings = compileNatsOptions(options);
  const log = options.log && componentLogger(options.log, 'work-transport', { transport: 'nats', stream: settings.streamName });
  const { js, jsm } = await jetStreamOf(nc);
  let closed = false;
  let closing: Promise<void> | undefined;
  const ctx: NatsContext = {
    nc,
    js,
    jsm,
    settings,
    log,
    assertOpen: (what) => {
      if (closed) throw new BatonError(`${what}: the NATS work transport is closed`);
    },
  };

  const provisioning = createProvisioning(ctx);
  await provisioning.ensureStream();
  const publisher = createPublisher(ctx, provisioning);
  const mover = createDeadLetterMover(ctx, provisioning, publisher);
  const consumers = createConsumers(ctx, provisioning, mover.watchAdvisories);
  const deadLetters = createDeadLetterQueue(ctx, provisioning, publisher, mover);
  const signals = createSignals(ctx);

  /**
   * Stops every consumer and dead-letter subscription (waiting for their handlers) and every
   * signal subscription, and flushes; the caller closes `nc`.
   */
  function close(): Promise<void> {
    closed = true;
    return (closing ??= (async () => {
      await signals.stopAll();
      await consumers.stopAll();
      await deadLetters.stopAll();
      await mover.close();
      await flushWithin(nc, FLUSH_TIMEOUT_MS);
    })());
  }

  return { kind: 'nats', publish: publisher.publish, ...consumers.port, ...deadLetters.port, ...signals.port, close };
}
