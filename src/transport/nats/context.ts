// What every part of one NATS work transport shares: its options, compiled once; the names it
// uses on the wire (streams, subjects, consumers); the JetStream handles; and small helpers
// around the JetStream API.
import { NatsError } from 'nats';
import type { JetStreamClient, JetStreamManager, MsgRequest, NatsConnection, StoredMsg } from 'nats';
import type { Logger } from 'pino';
import { BatonError, ConfigError } from '../../errors.ts';
import { compileTransportOptions, GONE_WORKER_AFTER_MS, positiveInteger } from '../internal.ts';
import type { WorkMessage, WorkTransportOptions } from '../work-transport.ts';

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
export const DEFAULT_CONSUMER_INACTIVE_THRESHOLD_MS = GONE_WORKER_AFTER_MS;
export const DEFAULT_DEAD_LETTER_SWEEP_MS = 60_000;

// How long an idle fetch waits at the server before it is renewed. The client's default (30 s);
// the server sends idle heartbeats every 15 s meanwhile, so a dead connection is noticed.
export const PULL_EXPIRES_MS = 30_000;
export const FLUSH_TIMEOUT_MS = 2_000;

// JetStream API error codes (nats-server's errors.json).
export const JS_STREAM_NOT_FOUND = 10059;
export const JS_CONSUMER_NOT_FOUND = 10014;
export const JS_STREAM_NAME_IN_USE = 10058; // exists with a different configuration
export const JS_STREAM_SUBJECT_OVERLAP = 10065; // another stream holds the subjects (or ours, created a moment ago by a racing process)
export const JS_CONSUMER_ALREADY_EXISTS = 10148; // 2.10+: create refused because the config differs
const JS_NO_MESSAGE_FOUND = 10037;
const JS_SEQUENCE_NOT_FOUND = 10043; // deleting a message that is already gone

export const apiErrorCode = (err: unknown): number | undefined => (err instanceof NatsError ? err.api_error?.err_code : undefined);

const STREAM_NAME = /^[A-Za-z0-9_-]+$/;
const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

export const encoder = new TextEncoder();
export const decoder = new TextDecoder();

/** A message body as JSON; undefined when it is not JSON. */
export function jsonOrUndefined(data: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(data));
  } catch {
    return undefined;
  }
}

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

/** Every worker consumer's name starts with this; the rest is the worker id's subject token. */
export const WORKER_CONSUMER_PREFIX = 'worker-';

/** The options, checked and with their defaults, and every name derived from them. */
export interface NatsSettings {
  ackWaitMs: number;
  maxDeliver: number;
  duplicateWindowMs: number;
  deadLetterSweepMs: number;
  inactiveThresholdMs: number;
  streamName: string;
  prefix: string;
  deadLetterStream: string;
  /** The dead-letter subjects' prefix: a sibling of the work subjects, not under them (the work stream owns `<prefix>.>`). */
  deadLetterPrefix: string;
  /** The name of a worker's durable pull consumer; also the part after `worker-` is the worker's token. */
  consumerName(workerId: string): string;
  /** The subjects of a worker's messages, every runtime. */
  filterFor(workerId: string): string;
  subjectFor(message: WorkMessage): string;
  deadLetterSubject(messageId: string): string;
  signalSubject(workerId: string): string;
  advisorySubject(consumer: string): string;
}

/** Throws ConfigError naming the option. */
export function compileNatsOptions(options: NatsWorkTransportOptions): NatsSettings {
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
  const deadLetterPrefix = `${prefix}_dlq`;
  return {
    ackWaitMs,
    maxDeliver,
    duplicateWindowMs,
    deadLetterSweepMs,
    inactiveThresholdMs,
    streamName,
    prefix,
    deadLetterStream,
    deadLetterPrefix,
    consumerName: (workerId) => `${WORKER_CONSUMER_PREFIX}${subjectToken(workerId)}`,
    filterFor: (workerId) => `${prefix}.*.${subjectToken(workerId)}`,
    subjectFor: (m) => `${prefix}.${subjectToken(m.runtime)}.${subjectToken(m.workerId)}`,
    deadLetterSubject: (messageId) => `${deadLetterPrefix}.${subjectToken(messageId.toLowerCase())}`,
    // Also a sibling: core NATS only, no stream may capture signals.
    signalSubject: (workerId) => `${prefix}_signal.${subjectToken(workerId)}`,
    advisorySubject: (consumer) => `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${streamName}.${consumer}`,
  };
}


/** The handles and settings every part of one transport instance works with. */
export interface NatsContext {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  settings: NatsSettings;
  log: Logger | undefined;
  /** Throws once the transport is closed. */
  assertOpen(what: string): void;
}

/** getMessage, with "no such message" and "no such stream" as undefined. */
export async function storedMessage(jsm: JetStreamManager, stream: string, query: MsgRequest): Promise<StoredMsg | undefined> {
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
export const nextMessage = (jsm: JetStreamManager, stream: string, seq: number, subject: string): Promise<StoredMsg | undefined> =>
  storedMessage(jsm, stream, { seq, next_by_subj: subject } as unknown as MsgRequest);

export async function deleteStored(jsm: JetStreamManager, stream: string, seq: number): Promise<void> {
  try {
    await jsm.streams.deleteMessage(stream, seq, false);
  } catch (err) {
    if (apiErrorCode(err) !== JS_SEQUENCE_NOT_FOUND) throw err; // gone already: someone else did it
  }
}

/** nc.flush(), but never longer than `ms`: a dead connection must not hang stop() or close(). */
export async function flushWithin(nc: NatsConnection, ms: number): Promise<void> {
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

/** The JetStream handles for `nc`; a clear error when the server has no JetStream. */
export async function jetStreamOf(nc: NatsConnection): Promise<{ js: JetStreamClient; jsm: JetStreamManager }> {
  let jsm: JetStreamManager;
  try {
    jsm = await nc.jetstreamManager();
  } catch (err) {
    throw new BatonError(`NATS at ${nc.getServer()} has no JetStream (start nats-server with -js): ${(err as Error).message}`, { cause: err });
  }
  return { js: nc.jetstream(), jsm };
}
