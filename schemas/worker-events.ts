// The worker event catalog: a worker's lifecycle, one stream per worker id (`worker-<id>`).
// History only: what the worker announced (started, draining, stopped) and what the
// executor concluded (lost). Heartbeats are liveness, not history, and never come here
// (src/liveness/ keeps them in a table).
import { z } from 'zod';
import { dateTime, text } from '../src/input/schemas.ts';
import { MAX_ACTION_VERSION } from '../src/input/action-versions.ts';
import { MAX_TIMER_MS } from '../src/async/sleep.ts';
import { EventMetadata, ExecutorRef, Namespace, WorkerRef } from './events.ts';

const IsoTime = dateTime();

/** Same metadata as execution events, with `by` narrowed to who may append each event. */
const event = <T extends string, D extends z.ZodType, B extends z.ZodType<string>>(type: T, data: D, by: B) =>
  z.object({ type: z.literal(type), data, metadata: EventMetadata.extend({ by }) });

/** Action names (`core.noop`) and runtime tags (`node`) a worker advertises. */
const Names = z.array(text().min(1).max(200)).min(1).max(10_000);

/**
 * What the executor needs to know of an action to schedule and retry it: the worker that runs
 * it advertises this, so the executor never has to load action code.
 */
/**
 * The longest delay between two attempts: the longest a Node timer holds (~24.8 days). A longer
 * one would leave the executor's retry timer firing at once, and past ~2.7e11 days no date.
 */
export const MAX_RETRY_INTERVAL_MS = MAX_TIMER_MS;
const intervalMs = z
  .number()
  .int()
  .min(0)
  .max(MAX_RETRY_INTERVAL_MS, `must be at most ${MAX_RETRY_INTERVAL_MS} ms (about 24.8 days), the longest wait between attempts`);

/**
 * An action's retry budget and backoff (defineAction adds its nonRetryable error types). New
 * announcements are checked against it; the executor reads stored ones unchecked, and
 * backoffDelayMs keeps any of them (an older, unbounded one) inside MAX_RETRY_INTERVAL_MS.
 */
export const RetryBackoff = z.object({
  maxAttempts: z.number().int().min(1).max(1000),
  initialIntervalMs: intervalMs,
  multiplier: z.number().min(1),
  maxIntervalMs: intervalMs,
});

/**
 * The delay before the attempt after `attempt` (1 for the first retry's): initialMs ×
 * multiplier^(attempt − 1), at most maxMs and never past MAX_RETRY_INTERVAL_MS, whatever the
 * numbers (Infinity, NaN from 0 × Infinity, or a stored policy missing a field give the cap).
 */
export function backoffDelayMs(initialMs: number, multiplier: number, maxMs: number, attempt: number): number {
  const cap = maxMs >= 0 && maxMs < MAX_RETRY_INTERVAL_MS ? maxMs : MAX_RETRY_INTERVAL_MS;
  const grown = initialMs * multiplier ** Math.max(0, attempt - 1);
  if (grown < 0) return 0;
  return grown < cap ? Math.round(grown) : cap;
}

/** The most executions of one action (or of one key of it) that may run at once. */
export const MAX_CONCURRENCY_LIMIT = 100_000;
/** A dotted path into the input: `tenantId`, `customer.id`, `items.0.sku`. */
export const CONCURRENCY_KEY_PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/**
 * At most `limit` executions of the action hold a slot at once (scheduled, handed off or
 * running); with `key`, at most `limit` per distinct value of that input path, and inputs
 * without the path share one bucket. The rest wait in Requested, in priority then FIFO order.
 */
export const ConcurrencyPolicy = z.object({
  limit: z
    .number({ error: `must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}` })
    .int(`must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}`)
    .min(1, `must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}`)
    .max(MAX_CONCURRENCY_LIMIT, `must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT}`),
  key: z
    .string({ error: 'must be a dotted path into the input, like "tenantId" or "customer.id"' })
    .max(200)
    .regex(CONCURRENCY_KEY_PATH, 'must be a dotted path into the input, like "tenantId" or "customer.id"')
    .optional(),
});
export type ConcurrencyPolicy = z.infer<typeof ConcurrencyPolicy>;

/** The most executions one bucket may start per period. */
export const MAX_RATE = 100_000;
const rate = z
  .number({ error: `must be an integer from 1 to ${MAX_RATE}` })
  .int(`must be an integer from 1 to ${MAX_RATE}`)
  .min(1, `must be an integer from 1 to ${MAX_RATE}`)
  .max(MAX_RATE, `must be an integer from 1 to ${MAX_RATE}`);

/**
 * At most `perSecond` (or `perMinute`) executions of the action are handed off per second (or
 * minute), across every executor; with `key`, a dotted path into the input, per distinct value
 * there (inputs without it share one bucket). The rest wait in Requested.
 */
export const RateLimitPolicy = z
  .object({
    perSecond: rate.optional(),
    perMinute: rate.optional(),
    key: z
      .string({ error: 'must be a dotted path into the input, like "tenantId" or "customer.id"' })
      .max(200)
      .regex(CONCURRENCY_KEY_PATH, 'must be a dotted path into the input, like "tenantId" or "customer.id"')
      .optional(),
  })
  .refine((p) => (p.perSecond === undefined) !== (p.perMinute === undefined), { message: 'give exactly one of perSecond and perMinute' });
export type RateLimitPolicy = z.infer<typeof RateLimitPolicy>;

export const ActionPolicy = z.object({
  /** The action's runtime tag: the work subject's `<runtime>` token (`node` when absent, as before workers said). */
  runtime: text().min(1).max(200).optional(),
  /** The version of the action this worker runs (defineAction's `version`); absent: version 1. */
  version: z.number().int().min(1).max(MAX_ACTION_VERSION).optional(),
  retry: RetryBackoff.optional(),
  scheduleToStartTimeoutMs: z.number().int().positive().optional(),
  timeoutMs: z.number().int().positive().optional(),
  concurrency: ConcurrencyPolicy.optional(),
  rateLimit: RateLimitPolicy.optional(),
});
export type ActionPolicy = z.infer<typeof ActionPolicy>;

/** A worker process came up (first start, or a restart of the same worker id) and takes work. */
export const WorkerStarted = event(
  'WorkerStarted',
  z.object({
    actions: Names,
    runtimes: Names,
    /** Executions it runs at once. */
    capacity: z.number().int().min(1).max(100_000),
    host: text().min(1).max(255).optional(),
    pid: z.number().int().positive().optional(),
    /** Per action: its runtime, and the retry policy, timeouts and concurrency limit it sets. */
    policies: z.record(text(), ActionPolicy).optional(),
    /** The namespaces whose executions it runs (`baton worker --namespaces`); absent: every namespace. */
    namespaces: z.array(Namespace).min(1).max(1_000).optional(),
  }),
  WorkerRef,
);
/** The worker stopped taking new work (SIGTERM, `baton worker drain`); it finishes or releases what it holds. */
export const WorkerDraining = event('WorkerDraining', z.object({ reason: text().min(1).max(1_000) }), WorkerRef);
/** The worker exited cleanly; it holds nothing. */
export const WorkerStopped = event('WorkerStopped', z.object({ reason: text().min(1).max(1_000) }), WorkerRef);
/**
 * The executor concluded the worker is gone (no heartbeat for too long) and will reclaim
 * what it held. `lastHeartbeatAt` is the last beat the executor saw.
 */
export const WorkerLost = event(
  'WorkerLost',
  z.object({ lastHeartbeatAt: IsoTime, reason: text().min(1).max(1_000) }),
  ExecutorRef,
);

export const WorkerEvent = z.discriminatedUnion('type', [WorkerStarted, WorkerDraining, WorkerStopped, WorkerLost]);
export type WorkerEvent = z.infer<typeof WorkerEvent>;
export type WorkerEventType = WorkerEvent['type'];
export type WorkerEventOf<T extends WorkerEventType> = Extract<WorkerEvent, { type: T }>;
export const workerEventTypes = WorkerEvent.options.map((o) => o.shape.type.value);

export const WORKER_STREAM_PREFIX = 'worker-';
export const workerStreamId = (workerId: string) => `${WORKER_STREAM_PREFIX}${workerId}`;
/** The worker id of a `worker-<id>` stream; undefined for any other stream. */
export const workerIdOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(WORKER_STREAM_PREFIX) && streamId.length > WORKER_STREAM_PREFIX.length
    ? streamId.slice(WORKER_STREAM_PREFIX.length)
    : undefined;
