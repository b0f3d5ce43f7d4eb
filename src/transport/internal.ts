// What both WorkTransport adapters share that the port leaves to them: the message schema they
// check on publish (and NATS on decode), option compilation, the checks on the port's
// arguments, the dead letters' words, and the worker signals' wire format, its checks and how
// one is handed to a handler. (How a delivery reaches its handler and is settled: ./pull-loop.ts.)
// Not part of the port: only the adapters (./nats/, ./postgres/) import this.
import type { Logger } from 'pino';
import { z } from 'zod';
import { BatonError, ConfigError, InvalidEventError, zodIssues } from '../errors.ts';
import { bigintTextProblem } from '../input/rules.ts';
import type { ConsumeOptions, ListDeadLettersOptions, WorkerSignal, WorkMessage, WorkTransport, WorkTransportOptions } from './work-transport.ts';
import { UUID } from '../ids.ts';

const nonEmpty = z.string().min(1, 'must be a non-empty string');

export const WorkMessageSchema = z.object({
  messageId: z.string().regex(UUID, 'must be a uuid (the eventId of the handoff)'),
  executionId: nonEmpty,
  workerId: nonEmpty,
  runtime: nonEmpty,
  action: nonEmpty,
  attempt: z.number().int().positive(),
  handoffRevision: z.string().regex(/^\d+$/, 'must be a decimal stream revision'),
  publishedAt: z.iso.datetime({ offset: true }),
  execution: z.object({ machineVersion: nonEmpty, value: nonEmpty, context: z.record(z.string(), z.unknown()) }).optional(),
  traceparent: z.string().max(100).optional(),
  tracestate: z.string().max(512).optional(),
}) satisfies z.ZodType<WorkMessage>;

/** Throws InvalidEventError naming the message's index and field. */
export function validateForPublish(messages: readonly WorkMessage[]): void {
  if (!Array.isArray(messages)) throw new BatonError('publish: messages must be an array of WorkMessage');
  messages.forEach((m, i) => {
    const r = WorkMessageSchema.safeParse(m);
    if (!r.success) throw new InvalidEventError(`work message messages[${i}]`, zodIssues(r.error));
  });
}

/**
 * One concern's share of the port (consuming, dead letters, signals), as an adapter's module
 * provides it, with what close() calls to stop everything it has running.
 */
export interface PortPart<K extends keyof WorkTransport> {
  port: Pick<WorkTransport, K>;
  stopAll(): Promise<void>;
}

export type ConsumePart = PortPart<'consume' | 'depth'>;
export type DeadLetterPart = PortPart<'onDeadLetter' | 'listDeadLetters' | 'getDeadLetter' | 'retryDeadLetter' | 'deleteDeadLetter'>;

export interface CompiledTransportOptions {
  ackWaitMs: number;
  maxDeliver: number;
}

export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_MAX_DELIVER = 5;

/**
 * How long a worker id may go without taking its work before that work is purged as left behind
 * (NATS: its consumer's inactive threshold; Postgres: unclaimedPurgeMs). One hour: far past any
 * reclaim of the executions it held, long enough for a worker restarting under its id to return.
 */
export const GONE_WORKER_AFTER_MS = 3_600_000;

export function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new ConfigError(`${name} must be a positive integer, got ${String(value)}`);
  return v;
}

export function compileTransportOptions(o: WorkTransportOptions): CompiledTransportOptions {
  return {
    ackWaitMs: positiveInteger('ackWaitMs', o.ackWaitMs, DEFAULT_ACK_WAIT_MS),
    maxDeliver: positiveInteger('maxDeliver', o.maxDeliver, DEFAULT_MAX_DELIVER),
  };
}

export function validateConsume(workerId: string, handler: unknown, options: ConsumeOptions): void {
  if (typeof workerId !== 'string' || workerId.length === 0) throw new BatonError('consume: workerId must be a non-empty string');
  if (typeof handler !== 'function') throw new BatonError('consume: handler must be a function');
  if (!Number.isInteger(options?.concurrency) || options.concurrency < 1) {
    throw new BatonError(`consume: concurrency must be a positive integer, got ${String(options?.concurrency)}`);
  }
}

// ---- dead letters ----

/** The same words from both adapters (the contract checks them). */
export const deadLetterReason = (deliveries: number): string => `not acknowledged after ${deliveries} ${deliveries === 1 ? 'delivery' : 'deliveries'}`;

export const MAX_DEAD_LETTER_PAGE = 1_000;

/** Both adapters' cursors are a decimal position (a stream sequence, a row's seq). */
export function validateListDeadLetters(o: ListDeadLettersOptions): { limit: number; after: bigint } {
  if (!Number.isInteger(o?.limit) || o.limit < 1 || o.limit > MAX_DEAD_LETTER_PAGE) {
    throw new BatonError(`listDeadLetters: limit must be an integer from 1 to ${MAX_DEAD_LETTER_PAGE}, got ${String(o?.limit)}`);
  }
  if (o.after !== undefined && (typeof o.after !== 'string' || bigintTextProblem(o.after))) {
    throw new BatonError(`listDeadLetters: after must be the cursor of a dead letter from an earlier page, got ${JSON.stringify(o.after)}`);
  }
  return { limit: o.limit, after: BigInt(o.after ?? '0') };
}

/** Message ids are uuids (the handoff's eventId); anything else can name no dead letter. */
export function validateMessageId(what: string, messageId: string): string {
  if (typeof messageId !== 'string' || !UUID.test(messageId)) throw new BatonError(`${what}: messageId must be a uuid, got ${JSON.stringify(messageId)}`);
  return messageId.toLowerCase();
}

export function validateDeadLetterHandler(handler: unknown): void {
  if (typeof handler !== 'function') throw new BatonError('onDeadLetter: handler must be a function');
}

/** How long a dead letter whose handler failed waits before it is handed over again: 1 s, doubling, at most 1 min. */
export const deadLetterRetryDelayMs = (failures: number): number => Math.min(1_000 * 2 ** Math.max(0, failures - 1), 60_000);

// ---- worker signals ----

export const MAX_SIGNAL_REASON_CHARS = 1_000;
/** The same bound as a worker id in the event catalog (schemas/events.ts WorkerId). */
const MAX_ID_CHARS = 200;
/**
 * Postgres refuses a NOTIFY payload of 8000 bytes or more (the default build). Both adapters put
 * the same envelope on the wire and refuse the same signals, so the limit is checked for both.
 * With the bounds below an envelope of ASCII ids is at most ~6,500 bytes (a 1,000-char reason of
 * control characters, which JSON escapes to 6 bytes each); only ids of such characters as well
 * can pass 8000, and the check blames the reason, the field that can give way.
 */
export const MAX_SIGNAL_PAYLOAD_BYTES = 7_999;

const boundedId = nonEmpty.max(MAX_ID_CHARS, `must be at most ${MAX_ID_CHARS} characters`);

export const WorkerSignalSchema = z.object({
  kind: z.literal('cancel'),
  executionId: boundedId,
  attempt: z.number().int().positive(),
  reason: nonEmpty.max(MAX_SIGNAL_REASON_CHARS, `must be at most ${MAX_SIGNAL_REASON_CHARS} characters`),
}) satisfies z.ZodType<WorkerSignal>;

/** What goes on the wire: the addressee travels with the signal (Postgres has one channel for all workers). */
const SignalEnvelopeSchema = z.object({ workerId: boundedId, signal: WorkerSignalSchema });
export type SignalEnvelope = z.infer<typeof SignalEnvelopeSchema>;

/**
 * The wire form of a signal for `workerId`: JSON of `{ workerId, signal }`, unknown fields
 * dropped. Throws InvalidEventError naming the field (`workerId`, `signal.attempt`, …), also
 * when the payload would not fit a NOTIFY.
 */
export function encodeSignal(workerId: string, signal: WorkerSignal): string {
  const r = SignalEnvelopeSchema.safeParse({ workerId, signal });
  if (!r.success) throw new InvalidEventError('worker signal', zodIssues(r.error));
  const payload = JSON.stringify(r.data);
  const bytes = Buffer.byteLength(payload, 'utf8');
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES) {
    throw new InvalidEventError('worker signal', [
      { path: 'signal.reason', message: `the encoded signal is ${bytes} bytes, more than the ${MAX_SIGNAL_PAYLOAD_BYTES} a NOTIFY carries; shorten the reason` },
    ]);
  }
  return payload;
}

/** A received payload as an envelope; undefined (logged) when it is not one. Never throws. */
export function decodeSignal(payload: string, log: Logger | undefined): SignalEnvelope | undefined {
  let json: unknown;
  try {
    json = JSON.parse(payload);
  } catch {
    json = undefined;
  }
  const r = SignalEnvelopeSchema.safeParse(json);
  if (!r.success) {
    log?.warn({ issues: json === undefined ? 'not JSON' : zodIssues(r.error), length: payload.length }, 'received worker signal is malformed; dropped');
    return undefined;
  }
  return r.data;
}

/** Checks onSignal's arguments: InvalidEventError naming workerId, BatonError for the handler. */
export function validateSignalSubscription(workerId: string, handler: unknown): void {
  const r = boundedId.safeParse(workerId);
  if (!r.success) throw new InvalidEventError('signal subscription', zodIssues(r.error).map((i) => ({ ...i, path: 'workerId' })));
  if (typeof handler !== 'function') throw new BatonError('onSignal: handler must be a function');
}

/**
 * Hand one signal to one subscription's handler, on a copy of its own. Never throws: a handler
 * that throws (or, typed loosely, returns a rejected promise) is logged and ignored.
 */
export function deliverSignal(handler: (signal: WorkerSignal) => void, { workerId, signal }: SignalEnvelope, log: Logger | undefined): void {
  const about = { workerId, executionId: signal.executionId, attempt: signal.attempt, kind: signal.kind };
  try {
    const returned: unknown = handler({ ...signal });
    if (returned instanceof Promise) returned.catch((err: unknown) => log?.warn({ err, ...about }, 'signal handler rejected; ignored'));
  } catch (err) {
    log?.warn({ err, ...about }, 'signal handler threw; ignored');
  }
}
