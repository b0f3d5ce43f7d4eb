// OpenTelemetry traces through the OpenTelemetry API only: one trace follows an execution from
// its submit through every attempt's schedule, handoff and run to each outcome. The trace context
// crosses processes in the events (W3C `traceparent`/`tracestate` in the metadata of
// ExecutionRequested and ExecutionHandedOff) and in the work message:
//
//   baton.submit                 the submitter (a child of the caller's active span, if any)
//   ├─ baton.schedule            the executor, one per attempt (siblings: the retries)
//   │  └─ baton.handoff          the executor's ExecutionHandedOff
//   │     └─ baton.run           the worker, one per delivery
//   │        └─ baton.outcome    the worker's outcome append
//   └─ baton.schedule …          attempt 2, and so on
//
// Nothing happens unless a tracer provider is registered (an OpenTelemetry SDK set up by the
// user: see README "Traces"): each helper asks the API first and, without one, runs its work
// bare and records nothing. A provider registered later is picked up from then on.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  createTraceState,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import { TRACEPARENT, TRACESTATE_MAX_CHARS } from '../../schemas/events.ts';

/** The trace context an event or a work message carries: the W3C headers of the span that wrote it. */
export interface TraceFields {
  traceparent?: string;
  tracestate?: string;
}

/** The instrumentation scope of Baton's spans (what a sampler or a processor can select them by). */
export const TRACER_NAME = 'baton';
/** What is recorded without a provider: nothing. */
const NONE: TraceFields = Object.freeze({});

type MaybeProxy = TracerProvider & { getDelegateTracer?(name: string): Tracer | undefined };

/**
 * The tracer, or undefined when no provider is registered. The API's global provider is a proxy
 * whose delegate is set by the SDK; duck-typed, since the user's SDK may bring its own copy of
 * the API (they share the registration, not the classes).
 */
export function activeTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider() as MaybeProxy;
  return typeof provider.getDelegateTracer === 'function' ? provider.getDelegateTracer(TRACER_NAME) : provider.getTracer(TRACER_NAME);
}

/** The fields that continue `span`'s trace elsewhere; empty for an invalid (no-op) span. */
export function traceFieldsOf(span: Span): TraceFields {
  const sc = span.spanContext();
  if (!trace.isSpanContextValid(sc)) return NONE;
  const state = sc.traceState?.serialize();
  return {
    traceparent: `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`,
    ...(state && state.length <= TRACESTATE_MAX_CHARS && { tracestate: state }),
  };
}

/** The remote parent `fields` name, or undefined when they name none (or nothing well-formed: trace context is advisory). */
export function contextFrom(fields: { traceparent?: unknown; tracestate?: unknown } | undefined): Context | undefined {
  const m = typeof fields?.traceparent === 'string' ? TRACEPARENT.exec(fields.traceparent) : null;
  if (!m) return undefined;
  const sc = { traceId: m[1]!, spanId: m[2]!, traceFlags: parseInt(m[3]!, 16), isRemote: true };
  if (!trace.isSpanContextValid(sc)) return undefined; // all-zero ids
  const state = typeof fields!.tracestate === 'string' && fields!.tracestate.length <= TRACESTATE_MAX_CHARS ? fields!.tracestate : undefined;
  return trace.setSpanContext(ROOT_CONTEXT, state ? { ...sc, traceState: createTraceState(state) } : sc);
}

/**
 * The trace context of an incoming HTTP request's W3C headers, when tracing and the request
 * names one (undefined otherwise, also when HTTP instrumentation already made the request's
 * span the active one: that span continues the caller's trace itself).
 */
export function requestTraceFields(headers: { get(name: string): string | null }): TraceFields | undefined {
  if (!activeTracer() || trace.getSpan(context.active())) return undefined;
  const traceparent = headers.get('traceparent');
  if (traceparent === null) return undefined;
  const tracestate = headers.get('tracestate');
  return { traceparent, ...(tracestate !== null && { tracestate }) };
}

/** Run `fn` as part of the trace `fields` name (as is, when they name none). */
export function withTraceParent<T>(fields: TraceFields | undefined, fn: () => T): T {
  const parent = contextFrom(fields);
  return parent ? context.with(parent, fn) : fn();
}

/** End `span` with the error's status. */
function endFailed(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  span.end();
}

/** What a submission's span says about it (a SubmitRequest is one). */
export interface Submitting {
  action: string;
  idempotencyKey?: string;
}
type Submitted = { executionId: string; created: boolean };
type SubmitOutcomeLike = { ok: true; result: Submitted } | { ok: false; error: unknown };

/** A `baton.submit` span, a child of the caller's active span, so a request handler's trace continues into Baton. */
function startSubmit(tracer: Tracer, request: Submitting): Span {
  const attributes = { 'baton.action': request.action, 'baton.idempotent': request.idempotencyKey !== undefined };
  return tracer.startSpan('baton.submit', { kind: SpanKind.PRODUCER, attributes }, context.active());
}

function endSubmit(span: Span, outcome: SubmitOutcomeLike): void {
  if (outcome.ok) {
    span.setAttributes({ 'baton.execution_id': outcome.result.executionId, 'baton.created': outcome.result.created });
    span.end();
  } else endFailed(span, outcome.error);
}

/**
 * A submission: `submit` gets the fields to record in ExecutionRequested's metadata (none
 * without a provider).
 */
export function traceSubmit<T extends Submitted>(request: Submitting, submit: (fields: TraceFields) => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  return tracer ? tracedSubmit(tracer, request, submit) : submit(NONE); // no extra promise without a provider
}

async function tracedSubmit<T extends Submitted>(tracer: Tracer, request: Submitting, submit: (fields: TraceFields) => Promise<T>): Promise<T> {
  const span = startSubmit(tracer, request);
  try {
    const r = await submit(traceFieldsOf(span));
    endSubmit(span, { ok: true, result: r });
    return r;
  } catch (err) {
    endFailed(span, err);
    throw err;
  }
}

/** A batch of submissions: one `baton.submit` span per request (as traceSubmit), `submit` gets each one's fields in order. */
export function traceSubmitMany<O extends SubmitOutcomeLike>(requests: readonly Submitting[], submit: (fields: readonly TraceFields[]) => Promise<O[]>): Promise<O[]> {
  const tracer = activeTracer();
  return tracer ? tracedSubmitMany(tracer, requests, submit) : submit(requests.map(() => NONE));
}

async function tracedSubmitMany<O extends SubmitOutcomeLike>(tracer: Tracer, requests: readonly Submitting[], submit: (fields: readonly TraceFields[]) => Promise<O[]>): Promise<O[]> {
  const spans = requests.map((r) => startSubmit(tracer, r));
  let outcomes: O[];
  try {
    outcomes = await submit(spans.map(traceFieldsOf));
  } catch (err) {
    for (const span of spans) endSubmit(span, { ok: false, error: err });
    throw err;
  }
  spans.forEach((span, i) => endSubmit(span, outcomes[i] ?? { ok: false, error: new Error('no outcome') }));
  return outcomes;
}

/** What a worker's run and its outcome hang from: the delivery being run. */
const runSpans = new WeakMap<object, Span>();

/**
 * One delivery's run, as a child of the handoff the work message names. The action runs in its
 * context, so spans the action makes (instrumented HTTP calls, its own) join the trace.
 */
export function traceRun(delivery: TracedDelivery, run: () => Promise<void>): Promise<void> {
  const tracer = activeTracer();
  return tracer ? tracedRun(tracer, delivery, run) : run();
}

type TracedDelivery = { message: { executionId: string; action: string; attempt: number; workerId: string } & TraceFields; deliveryCount: number };

async function tracedRun(tracer: Tracer, delivery: TracedDelivery, run: () => Promise<void>): Promise<void> {
  const m = delivery.message;
  const attributes: Attributes = { 'baton.execution_id': m.executionId, 'baton.action': m.action, 'baton.attempt': m.attempt, 'baton.worker_id': m.workerId, 'baton.delivery': delivery.deliveryCount };
  const span = tracer.startSpan('baton.run', { kind: SpanKind.CONSUMER, attributes }, contextFrom(m) ?? ROOT_CONTEXT);
  runSpans.set(delivery, span);
  try {
    await context.with(trace.setSpan(context.active(), span), run);
    span.end();
  } catch (err) {
    endFailed(span, err);
    throw err;
  } finally {
    runSpans.delete(delivery);
  }
}

/** The worker's outcome append (`type`: ExecutionCompleted, ExecutionFailed, …), a child of the delivery's run; `append` gets the fields to record. */
export function traceOutcome<T>(delivery: { message: { executionId: string } }, type: string, append: (fields: TraceFields) => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  const run = tracer && runSpans.get(delivery);
  return tracer && run ? tracedOutcome(tracer, run, delivery, type, append) : append(NONE);
}

async function tracedOutcome<T>(tracer: Tracer, run: Span, delivery: { message: { executionId: string } }, type: string, append: (fields: TraceFields) => Promise<T>): Promise<T> {
  run.setAttribute('baton.outcome', type);
  const attributes = { 'baton.execution_id': delivery.message.executionId, 'baton.outcome': type };
  const span = tracer.startSpan('baton.outcome', { attributes }, trace.setSpan(ROOT_CONTEXT, run));
  if (type === 'ExecutionFailed' || type === 'ExecutionTimedOut') for (const s of [span, run]) s.setStatus({ code: SpanStatusCode.ERROR, message: type });
  try {
    const r = await append(traceFieldsOf(span));
    span.end();
    return r;
  } catch (err) {
    endFailed(span, err);
    throw err;
  }
}
