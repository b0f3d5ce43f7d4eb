// The execution event catalog: one zod schema per event, defined once. The machine, the
// event store, the projections, the API and the docs all use these; TypeScript types are
// inferred from them, never written twice.
import { z } from 'zod';
import { INT32 } from '../src/input/rules.ts';
import { MAX_ACTION_VERSION } from '../src/input/action-versions.ts';
import { dateTime, jsonValue, text, withoutProtoKey } from '../src/input/schemas.ts';
import { NAMESPACE_MAX_LENGTH, NAMESPACE_PATTERN, NAMESPACE_RULE } from '../src/input/namespace.ts';
import { tagKeyProblem, tagsProblems } from '../src/input/tags.ts';

/** Who appends an event: the executor, or the worker that holds the baton. */
export const ExecutorRef = z.literal('executor');
/** A worker's id: what `baton worker --id` takes and what `worker:<id>` refs carry. */
export const WorkerId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._:-]+$/, 'may contain only letters, digits and . _ : -');
export const WorkerRef = z
  .string()
  .regex(/^worker:[A-Za-z0-9._:-]+$/, 'must be "worker:<id>" (letters, digits, . _ : -)');
export const ActorRef = z.union([ExecutorRef, WorkerRef]);
export type ActorRef = z.infer<typeof ActorRef>;

const IsoTime = dateTime();

/** W3C trace context, version 00: `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>` (https://www.w3.org/TR/trace-context/). */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** Longest tracestate kept (what W3C propagators keep). */
export const TRACESTATE_MAX_CHARS = 512;

/**
 * Metadata every event carries. `occurredAt` is the appender's clock reading: the machine
 * never reads a clock, so any time it keeps in its context comes from here.
 */
const metadata = <B extends z.ZodType<string>>(by: B) =>
  z.object({
    by,
    occurredAt: IsoTime,
    correlationId: text().min(1).optional(),
    causationId: text().min(1).optional(),
    machineVersion: text().min(1).optional(),
    /** The state the machine reached with this event when it was appended; replay compares against it. */
    stateAfter: text().min(1).optional(),
    /** W3C trace context of the span that wrote the event, when a tracer was registered (src/observability/tracing.ts). */
    traceparent: z.string().regex(TRACEPARENT, 'must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)').optional(),
    tracestate: text().max(TRACESTATE_MAX_CHARS).optional(),
  });
export const EventMetadata = metadata(ActorRef);
export type EventMetadata = z.infer<typeof EventMetadata>;

const event = <T extends string, D extends z.ZodType, B extends z.ZodType<string>>(
  type: T,
  data: D,
  by: B,
) => z.object({ type: z.literal(type), data, metadata: metadata(by) });

export const ErrorInfo = z.object({
  message: text(),
  type: text().optional(),
  stack: text().optional(),
});
export type ErrorInfo = z.infer<typeof ErrorInfo>;

/** A namespace's name (src/input/namespace.ts has the rule). */
export const Namespace = z.string().min(1).max(NAMESPACE_MAX_LENGTH).regex(NAMESPACE_PATTERN, NAMESPACE_RULE);
/** String key-values to find an execution by (src/input/tags.ts has the rules: key shape, lengths, at most 32). */
export const Tags = withoutProtoKey(
  z.record(z.string(), z.string()).superRefine((tags, ctx) => {
    for (const p of tagsProblems(tags)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
  }),
  // Checked before the record: it skips an own `__proto__` key, so a check of its output never sees one.
  tagKeyProblem('__proto__')!,
);
export type Tags = z.infer<typeof Tags>;

const Attempt = z.number().int().positive();
/** An action version (src/input/action-versions.ts): absent in an event means version 1, the version of an action that declares none. */
const ActionVersion = z.number().int().min(1).max(MAX_ACTION_VERSION);
const MaxAttempts = z.number().int().min(1).max(1000);

export const ExecutionRequested = event(
  'ExecutionRequested',
  z.object({
    action: text().min(1).max(200),
    input: jsonValue(),
    /** The attempt limit the submission named, or (maxAttemptsIsDefault) the submitter's default. */
    maxAttempts: MaxAttempts,
    /**
     * maxAttempts is the submitter's default (BATON_MAX_ATTEMPTS), not the submission's own: the
     * action's retry.maxAttempts replaces it when the executor schedules the execution (see
     * SchedulingStarted). Absent: the submission named maxAttempts, which the action's limit may
     * lower but never raise. (Before machine version 4 it was never written: every limit was
     * read as the submission's.)
     */
    maxAttemptsIsDefault: z.literal(true).optional(),
    idempotencyKey: text().min(1).max(500).optional(),
    priority: z.number().int().min(INT32.min).max(INT32.max).optional(),
    parentId: text().min(1).optional(),
    workflowId: text().min(1).optional(),
    /** The namespace it lives in. Absent (recorded before namespaces): `default`. */
    namespace: Namespace.optional(),
    /** Tags the submitter attached (machine version 5; absent when none). */
    tags: Tags.optional(),
    /**
     * The action version the submission pinned (machine version 6): every attempt runs on it.
     * Absent: each attempt runs on the newest version a live worker offers when it is handed off.
     */
    actionVersion: ActionVersion.optional(),
  }),
  ExecutorRef,
);
export const SchedulingStarted = event(
  'SchedulingStarted',
  z.object({
    /**
     * The attempt limit from now on, as the executor resolved it when it took this attempt to
     * schedule: the action's advertised retry.maxAttempts, capped by a limit the submission
     * named; the execution's current limit when the action sets none. Absent (written before
     * machine version 4, or by hand): the limit stays as it was.
     */
    maxAttempts: MaxAttempts.optional(),
  }),
  ExecutorRef,
);
export const ExecutionHandedOff = event(
  'ExecutionHandedOff',
  z.object({
    workerId: WorkerId,
    attempt: Attempt,
    /** schedule-to-start deadline: the worker must start before this. */
    deadline: IsoTime,
    /** The action version this attempt is handed off to run (machine version 6); absent: version 1. A pinned execution's is its pin. */
    actionVersion: ActionVersion.optional(),
    /**
     * The attempt limit from now on, as SchedulingStarted.maxAttempts (machine version 7, whose
     * handoff comes straight from Requested: the executor no longer appends SchedulingStarted).
     * Absent: the limit stays as it was.
     */
    maxAttempts: MaxAttempts.optional(),
  }),
  ExecutorRef,
);
export const ExecutionStarted = event(
  'ExecutionStarted',
  z.object({
    attempt: Attempt,
    /** start-to-close deadline, when the action has one. */
    deadline: IsoTime.optional(),
    /** The run counts as stalled when it goes this long without progress (heartbeats are not progress). */
    stallTimeoutMs: z.number().int().positive().optional(),
    /** The action version the worker runs (machine version 6); absent: version 1. Must be the handoff's. */
    actionVersion: ActionVersion.optional(),
  }),
  WorkerRef,
);
export const ExecutionProgressed = event(
  'ExecutionProgressed',
  z.object({ details: jsonValue().optional() }),
  WorkerRef,
);
/**
 * The running action added tags (machine version 5): merged into the execution's tags, a key
 * already there takes the new value. Not progress: it does not reset the stall clock.
 */
export const ExecutionTagged = event(
  'ExecutionTagged',
  z.object({
    tags: Tags.refine((tags) => Object.keys(tags).length > 0, 'must hold at least one tag'),
  }),
  ActorRef,
);
export const ExecutionCompleted = event('ExecutionCompleted', z.object({ result: jsonValue() }), WorkerRef);
export const ExecutionFailed = event(
  'ExecutionFailed',
  z.object({ error: ErrorInfo, retryable: z.boolean() }),
  WorkerRef,
);
export const ExecutionCancelled = event(
  'ExecutionCancelled',
  z.object({ reason: text().min(1) }),
  ActorRef,
);
/**
 * Someone asked to cancel an execution a worker holds. Not a transition: the owner stays the
 * owner; the executor rings the worker, whose run is aborted and which appends
 * ExecutionCancelled. If the baton comes back to the executor instead (the worker was lost or
 * released it), the executor ends it as Cancelled rather than retrying.
 */
export const ExecutionCancelRequested = event(
  'ExecutionCancelRequested',
  z.object({ reason: text().min(1).max(1_000) }),
  ExecutorRef,
);
export const ExecutionTimedOut = event(
  'ExecutionTimedOut',
  z.object({
    limit: z.enum(['start-to-close', 'heartbeat', 'stall']),
    deadline: IsoTime,
  }),
  ActorRef,
);
export const OwnershipReclaimed = event(
  'OwnershipReclaimed',
  z.object({
    /** worker-restarted (machine version 4): the worker id announced a new process while the old one still held it. */
    reason: z.enum(['schedule-to-start', 'worker-lost', 'worker-restarted', 'heartbeat', 'drain', 'manual', 'dead-letter']),
    workerId: WorkerId,
    attempt: Attempt,
  }),
  ExecutorRef,
);
export const OwnershipReleased = event(
  'OwnershipReleased',
  z.object({ reason: text().min(1) }),
  WorkerRef,
);
export const ExecutionRetryScheduled = event(
  'ExecutionRetryScheduled',
  z.object({
    attempt: Attempt,
    /** earliest time the next attempt may be scheduled (backoff). */
    retryAt: IsoTime,
    reason: text().min(1),
  }),
  ExecutorRef,
);
export const ExecutionAbandoned = event(
  'ExecutionAbandoned',
  z.object({ reason: text().min(1) }),
  ExecutorRef,
);

export const ExecutionEvent = z.discriminatedUnion('type', [
  ExecutionRequested,
  SchedulingStarted,
  ExecutionHandedOff,
  ExecutionStarted,
  ExecutionProgressed,
  ExecutionTagged,
  ExecutionCompleted,
  ExecutionFailed,
  ExecutionCancelled,
  ExecutionCancelRequested,
  ExecutionTimedOut,
  OwnershipReclaimed,
  OwnershipReleased,
  ExecutionRetryScheduled,
  ExecutionAbandoned,
]);
export type ExecutionEvent = z.infer<typeof ExecutionEvent>;
export type ExecutionEventType = ExecutionEvent['type'];
export type ExecutionEventOf<T extends ExecutionEventType> = Extract<ExecutionEvent, { type: T }>;
export const executionEventTypes = ExecutionEvent.options.map((o) => o.shape.type.value);

/** The event types after which an execution never changes again. */
export const terminalEventTypes = [
  'ExecutionCompleted',
  'ExecutionCancelled',
  'ExecutionTimedOut',
  'ExecutionAbandoned',
] as const satisfies readonly ExecutionEventType[];
// ExecutionFailed is terminal only when it is not retried; the machine decides.

export const executionStreamId = (executionId: string) => `execution-${executionId}`;
export const EXECUTION_STREAM_PREFIX = 'execution-';
/** The execution id of an `execution-<id>` stream; undefined for any other stream. */
export const executionIdOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(EXECUTION_STREAM_PREFIX) ? streamId.slice(EXECUTION_STREAM_PREFIX.length) : undefined;
