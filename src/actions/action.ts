// Actions: the named units of work a worker runs. An action is a zod input schema plus a
// function; `defineAction` checks the definition once, up front, so a typo in a name or a
// negative timeout fails when the worker loads its actions, not when the first execution
// arrives.
//
//   export const resize = defineAction({
//     name: 'images.resize',
//     input: z.object({ url: z.url(), width: z.number().int().positive() }),
//     timeoutMs: 60_000,
//     concurrency: { limit: 4, key: 'tenantId' },   // at most 4 at once per tenant
//     version: 2,                                   // deployed beside version 1 (README: Versioned actions)
//     rateLimit: { perSecond: 10 },                  // at most 10 started per second, all executors together
//     async run({ url, width }, ctx) { … ctx.heartbeat({ pct: 50 }); … },
//   });
import type { Logger } from 'pino';
import { z } from 'zod';
import { ConcurrencyPolicy, RateLimitPolicy, RetryBackoff, backoffDelayMs } from '../../schemas/worker-events.ts';
import { BatonError } from '../errors.ts';
import { printable } from '../input/rules.ts';
import { zodProblems } from '../input/schemas.ts';
import { MAX_ACTION_VERSION } from '../input/action-versions.ts';
import { MAX_TIMER_MS } from '../async/sleep.ts';

/**
 * Dotted lowercase names: a namespace, then one or more `.part`s (`core.noop`,
 * `http.request`, `billing.invoice.send`). The dot keeps user actions out of the `core.`
 * and `http.` namespaces by convention, and the name stays a single NATS subject token
 * neither `*`, `>` nor whitespace can break.
 */
export const ACTION_NAME = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$/;
/** Same limit as ExecutionRequested.action. */
const MAX_NAME_LENGTH = 200;
/**
 * A runtime tag is one token of the work subject `work.<runtime>.<workerId>`, so no dots:
 * `node` (the default), `python`, `gpu`, …
 */
export const RUNTIME_NAME = /^[a-z][a-z0-9_-]*$/;
export const DEFAULT_RUNTIME = 'node';

/** How a failed attempt is retried (`defineAction({ retry })`): exponential backoff, capped. */
export interface RetryPolicy {
  /** Attempts in total, the first included; 1 means never retry. */
  maxAttempts: number;
  /** Delay before the second attempt. At most MAX_RETRY_INTERVAL_MS (2147483647 ms, ~24.8 days), as maxIntervalMs. */
  initialIntervalMs: number;
  /** Each further delay is the previous one times this (≥ 1). */
  multiplier: number;
  /** No delay is ever longer than this. */
  maxIntervalMs: number;
  /** Error types (ActionError.type, else the error's name) that are never retried. */
  nonRetryable?: string[];
}

/** The backoff of an action that sets none, and of the fields a `retry` leaves out: 1 s, doubling, at most 60 s. */
export const DEFAULT_BACKOFF: Readonly<Pick<RetryPolicy, 'initialIntervalMs' | 'multiplier' | 'maxIntervalMs'>> = Object.freeze({ initialIntervalMs: 1_000, multiplier: 2, maxIntervalMs: 60_000 });

/** `retry` as a definition may give it: the backoff's fields default (DEFAULT_BACKOFF; a longer first delay raises the cap to it). */
export type RetryPolicyInput = Pick<RetryPolicy, 'maxAttempts' | 'nonRetryable'> & Partial<Pick<RetryPolicy, 'initialIntervalMs' | 'multiplier' | 'maxIntervalMs'>>;

/** What `run` gets besides its input. */
export interface ActionContext {
  /** The execution this run belongs to. */
  executionId: string;
  /** 1-based. */
  attempt: number;
  /** Aborted when the run must stop: cancelled, timed out, ownership lost, worker shutting down. */
  signal: AbortSignal;
  /**
   * "Still alive", with optional progress details: keeps the heartbeat timeout from firing and
   * the delivery from being redelivered. Cheap to call as often as you like: the transport is
   * told at most once per tenth of its ack-wait, and details are recorded (ExecutionProgressed)
   * at most once a second, the latest at the end of that second and before the outcome. Details
   * are JSON, copied at the call (a toJSON is honoured, as for a result); details JSON cannot
   * hold exactly (a BigInt, NaN, a cycle, a function, over 4 MiB) throw InvalidInputError at
   * once, naming the field (`details.pct: NaN is not a JSON number`), as ctx.tag does.
   */
  heartbeat(details?: unknown): void;
  /**
   * Add tags to the execution (`{ invoice: 'inv-7' }`), recorded as ExecutionTagged, so it can be
   * found by them (`baton list --tag invoice=inv-7`); a key it already has takes the new value.
   * Bad tags (src/input/tags.ts rules; more than 32 in all) throw at once, naming the tag. The
   * promise resolves once recorded and rejects when they were not (a database error; the run no
   * longer holds the execution). Await it to be sure; not awaiting is fine (a failure then only
   * reaches the worker's log, never an unhandled rejection).
   */
  tag(tags: Record<string, string>): Promise<void>;
  /** Already bound to the execution (executionId, attempt). */
  log: Logger;
}

/** What `defineAction` takes. `input`'s output type is what `run` receives. */
export interface ActionSpec<S extends z.ZodType, O> {
  /** Dotted lowercase name, unique among your actions: a namespace, then one or more `.part`s (`billing.charge`). */
  name: string;
  /**
   * A whole number from 1: workers advertise `name@version`, a submission may pin one, and an
   * unpinned one runs on the newest version any live worker offers. Absent: version 1.
   */
  version?: number;
  /** Runtime tag the action needs (`node` unless said otherwise). */
  runtime?: string;
  /** The zod schema every input must fit; checked at submit (every door) and again before `run`. */
  input: S;
  /** start-to-close limit for one attempt (default BATON_START_TO_CLOSE_TIMEOUT, 10 min). */
  timeoutMs?: number;
  /** The run times out when it goes this long without ctx.heartbeat(). */
  heartbeatTimeoutMs?: number;
  /** The run is flagged stalled (not stopped) when it goes this long without progress: ctx.heartbeat(details). */
  stallTimeoutMs?: number;
  /** A handoff not started within this long is reclaimed and retried elsewhere (default BATON_SCHEDULE_TO_START_TIMEOUT, 30 s). */
  scheduleToStartTimeoutMs?: number;
  retry?: RetryPolicyInput;
  /**
   * At most `limit` (1 to 100,000) executions of this action hold a slot at once, from the
   * moment the executor schedules one until it reaches a final state or its baton comes back
   * (a retry then queues again). With `key`, a dotted path into the input (`tenantId`,
   * `customer.id`), the limit holds per distinct value there; every input without that path
   * (or with null there) shares one bucket. The rest wait in Requested, in priority order.
   * Advertised by the worker (WorkerStarted.policies); the executor enforces it.
   */
  concurrency?: { limit: number; key?: string };
  /**
   * At most `perSecond` (or `perMinute`, 1 to 100,000) executions of this action are handed off
   * per second (or minute), across every worker and executor; with `key`, a dotted path into the
   * input, per distinct value there. The rest wait in Requested (waitingReason says so).
   * Advertised by the worker; the executors decide it through a bucket stream (README: Rate limits).
   */
  rateLimit?: { perSecond?: number; perMinute?: number; key?: string };
  /**
   * The work. Its return value (JSON) is the execution's result, stored as returned: what JSON
   * cannot hold exactly (NaN, a Map, a Uint8Array, a function, a cycle) fails the execution as
   * UnstorableResult naming the place; a value's own toJSON is honoured (a Date is stored as its
   * ISO text); undefined (nothing returned) is null. A throw fails the attempt
   * (retried unless `ActionError({ retryable: false })` or `retry.nonRetryable` says otherwise).
   * Stop when `ctx.signal` aborts.
   */
  run(input: z.output<S>, ctx: ActionContext): O | Promise<O>;
}

const BRAND = Symbol.for('baton.action-definition');

/**
 * A checked action; only `defineAction` makes one (`isActionDefinition` tells). `I` is what
 * `run` receives (the schema's output), `O` what it resolves with, `In` what a submission
 * passes (the schema's input, before its defaults and transforms).
 */
export interface ActionDefinition<I = unknown, O = unknown, In = I> {
  /** Dotted lowercase name, e.g. `billing.charge`. */
  readonly name: string;
  /** Present only when the definition declared one (absent means version 1). */
  readonly version?: number;
  /** The runtime tag a worker must offer (`node` by default). */
  readonly runtime: string;
  /** The zod schema every input is checked against, before anything is stored. */
  readonly input: z.ZodType<I, In>;
  readonly timeoutMs?: number;
  readonly heartbeatTimeoutMs?: number;
  readonly stallTimeoutMs?: number;
  readonly scheduleToStartTimeoutMs?: number;
  readonly retry?: Readonly<RetryPolicy>;
  readonly concurrency?: Readonly<{ limit: number; key?: string }>;
  readonly rateLimit?: Readonly<{ perSecond?: number; perMinute?: number; key?: string }>;
  /** Always async, whether the spec's run was or not. Call through `runAction`, which validates first. */
  run(input: I, ctx: ActionContext): Promise<O>;
  readonly [BRAND]: true;
}

/** An action of any input and output: what registries and loaders hold. */
// `any`, not `unknown`: `run` takes I, so an ActionDefinition<{ ms: number }> is not an
// ActionDefinition<unknown> under strict variance, yet a registry must hold both.
export type AnyActionDefinition = ActionDefinition<any, any>;

/** A definition that cannot work: the message names the action and the field. */
export class InvalidActionDefinitionError extends BatonError {
  constructor(
    readonly action: string,
    readonly issues: { path: string; message: string }[],
  ) {
    super(`invalid action definition${action ? ` "${printable(action, 100)}"` : ''}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
  }
}

const positiveMs = z.number().int().positive().max(MAX_TIMER_MS);

// Strict, so a misspelt option (`timeout`, `retries`) is refused rather than silently ignored.
const ATTEMPTS = 'the attempts in total, the first included, a whole number from 1 to 1000 (retry: { maxAttempts: 5 })';

const SpecShape = z.strictObject({
  name: z
    .string({ error: 'must be a string like "core.noop"' })
    .max(MAX_NAME_LENGTH)
    .regex(
      ACTION_NAME,
      'must be lowercase dotted segments like "core.noop" or "http.request": ' +
        'a namespace, then one or more ".part"s, using a-z, 0-9, _ and -',
    ),
  version: z
    .number({ error: `must be a whole number from 1 to ${MAX_ACTION_VERSION}, like 2` })
    .int(`must be a whole number from 1 to ${MAX_ACTION_VERSION}, like 2`)
    .min(1, `must be a whole number from 1 to ${MAX_ACTION_VERSION}, like 2`)
    .max(MAX_ACTION_VERSION, `must be a whole number from 1 to ${MAX_ACTION_VERSION}, like 2`)
    .optional(),
  runtime: z
    .string()
    .max(100)
    .regex(RUNTIME_NAME, 'must be one lowercase token like "node" or "python" (a-z, 0-9, _ and -; no dots)'),
  input: z.custom<z.ZodType>(
    (v) => typeof v === 'object' && v !== null && typeof (v as { safeParse?: unknown }).safeParse === 'function',
    'must be a zod schema (e.g. z.object({ … }))',
  ),
  timeoutMs: positiveMs.optional(),
  heartbeatTimeoutMs: positiveMs.optional(),
  stallTimeoutMs: positiveMs.optional(),
  scheduleToStartTimeoutMs: positiveMs.optional(),
  retry: z
    .strictObject({
      // Required: a retry says how many attempts it gives (the executor's default is for actions without one).
      maxAttempts: z
        .number({ error: (issue) => (issue.input === undefined ? `required with retry: ${ATTEMPTS}; an action without retry gets BATON_MAX_ATTEMPTS (default 3)` : `must be ${ATTEMPTS}`) })
        .int(`must be ${ATTEMPTS}`)
        .min(1, `must be ${ATTEMPTS}`)
        .max(1000, `must be ${ATTEMPTS}`),
      initialIntervalMs: RetryBackoff.shape.initialIntervalMs.default(DEFAULT_BACKOFF.initialIntervalMs),
      multiplier: RetryBackoff.shape.multiplier.default(DEFAULT_BACKOFF.multiplier),
      maxIntervalMs: RetryBackoff.shape.maxIntervalMs.optional(),
      nonRetryable: z.array(z.string().min(1)).optional(),
    })
    .transform(({ maxIntervalMs, ...r }) => ({ ...r, maxIntervalMs: maxIntervalMs ?? Math.max(DEFAULT_BACKOFF.maxIntervalMs, r.initialIntervalMs) }))
    .refine((r) => r.maxIntervalMs >= r.initialIntervalMs, {
      message: 'maxIntervalMs must be at least initialIntervalMs',
      path: ['maxIntervalMs'],
    })
    .optional(),
  concurrency: ConcurrencyPolicy.strict().optional(),
  rateLimit: RateLimitPolicy.strict().optional(),
  run: z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', 'must be a function (input, ctx) => result'),
});

/** Words people write for an option, mapped to the option they meant. */
const OPTION_ALIASES: Readonly<Record<string, string>> = {
  timeout: 'timeoutMs',
  schema: 'input',
  handler: 'run',
  execute: 'run',
  retries: 'retry',
  maxAttempts: 'retry',
  limit: 'concurrency',
  actionVersion: 'version',
};

/**
 * Checks the definition and returns the action. Throws InvalidActionDefinitionError naming
 * each bad field (`name: must be lowercase dotted segments…`, `timeoutMs: Too small…`).
 */
export function defineAction<S extends z.ZodType, O>(spec: ActionSpec<S, O>): ActionDefinition<z.output<S>, Awaited<O>, z.input<S>> {
  const parsed = SpecShape.safeParse({ ...spec, runtime: spec?.runtime ?? DEFAULT_RUNTIME });
  if (!parsed.success) {
    const name = typeof spec?.name === 'string' ? spec.name : '';
    throw new InvalidActionDefinitionError(name, zodProblems(parsed.error, SpecShape, OPTION_ALIASES));
  }
  const { name, version, runtime, timeoutMs, heartbeatTimeoutMs, stallTimeoutMs, scheduleToStartTimeoutMs, retry, concurrency, rateLimit } = parsed.data;
  const run = spec.run;
  return Object.freeze({
    name,
    ...(version !== undefined && { version }),
    runtime,
    input: spec.input as z.ZodType<z.output<S>, z.input<S>>,
    // Only present keys, so a definition prints (and compares) without undefined noise.
    ...(timeoutMs !== undefined && { timeoutMs }),
    ...(heartbeatTimeoutMs !== undefined && { heartbeatTimeoutMs }),
    ...(stallTimeoutMs !== undefined && { stallTimeoutMs }),
    ...(scheduleToStartTimeoutMs !== undefined && { scheduleToStartTimeoutMs }),
    ...(retry !== undefined && { retry: Object.freeze({ ...retry }) }),
    ...(concurrency !== undefined && { concurrency: Object.freeze({ ...concurrency }) }),
    ...(rateLimit !== undefined && { rateLimit: Object.freeze({ ...rateLimit }) }),
    // `async` so a run that throws synchronously still yields a rejected promise.
    run: async (input: z.output<S>, ctx: ActionContext): Promise<Awaited<O>> => await run(input, ctx),
    [BRAND]: true as const,
  });
}

export function isActionDefinition(value: unknown): value is AnyActionDefinition {
  return typeof value === 'object' && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
}

// Failing an action: src/actions/action-errors.ts.
export { ActionError, InvalidActionInputError, errorType, isA, isRetryable, toErrorInfo, type ActionErrorOptions } from './action-errors.ts';

/**
 * The delay before attempt `nextAttempt` (2 for the first retry) under `policy`:
 * initialIntervalMs × multiplier^(nextAttempt − 2), capped at maxIntervalMs.
 */
export function retryDelayMs(policy: RetryPolicy, nextAttempt: number): number {
  return backoffDelayMs(policy.initialIntervalMs, policy.multiplier, policy.maxIntervalMs, nextAttempt - 1);
}
