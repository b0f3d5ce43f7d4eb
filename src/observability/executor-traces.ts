// The executor's part of an execution's trace (see tracing.ts): one `baton.schedule` span per
// attempt, a child of the submit recorded in ExecutionRequested, starting when the attempt began
// to wait (the request, or the retry's due time) so the trace shows the queue wait; inside it the
// `baton.handoff` span, whose context ExecutionHandedOff records and the work message carries to
// the worker (also when the monitor publishes it again).
//
// An execution submitted without a trace (no provider where it was submitted) still gets one:
// its id is the trace id (untracedSubmit). The contexts are remembered from the changes the
// executor already hears (its own appends and what it follows), per live execution, and
// forgotten once it is past its handoff or final. Without a registered tracer provider none of
// this runs.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context } from '@opentelemetry/api';
import { isFinal, statusOf, type ExecutionContext, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { Change } from '../runtime/actor-runtime.ts';
import type { WorkMessage, WorkTransport } from '../transport/work-transport.ts';
import { activeTracer, contextFrom, traceFieldsOf, type TraceFields } from './tracing.ts';

export interface HandoffTrace {
  /** Recorded in ExecutionHandedOff's metadata. */
  fields: TraceFields;
  /** The handoff was appended (`handedOff`), found nothing to do, or failed. */
  end(o: { attempt?: number; handedOff: boolean; error?: unknown }): void;
}

export interface ExecutorTraces {
  /** The runtime's change listener: remembers the trace context of each submission and handoff. */
  observe(change: Change<ExecutionSnapshot, ExecutionEvent>): void;
  /** The spans of one handoff about to be decided; undefined without a provider. */
  handoff(o: { executionId: string; action: string; workerId: string }): HandoffTrace | undefined;
  /** `transport`, whose published work messages carry their handoff's trace context. */
  publishing(transport: WorkTransport): WorkTransport;
}

/** When the attempt about to be handed off began to wait: its request, or its retry's due time (never in the future). */
export function waitingSince(c: Pick<ExecutionContext, 'attempt' | 'requestedAt' | 'retryAt' | 'updatedAt'> | undefined, now: number): number {
  if (!c) return now;
  const since = Date.parse(c.attempt <= 1 ? c.requestedAt : (c.retryAt ?? c.updatedAt));
  return Number.isFinite(since) ? Math.min(since, now) : now;
}

/**
 * The parent of the attempts of an execution whose submit recorded no trace (its submitter had no
 * tracer provider): a trace whose id is the execution id without its dashes, so that all its
 * attempts still share one trace, which a tracing UI finds by the execution id. (That parent span
 * was never exported: a UI may say so.)
 */
export function untracedSubmit(executionId: string): Context {
  const hex = executionId.replace(/-/g, '').toLowerCase();
  return (/^[0-9a-f]{32}$/.test(hex) && contextFrom({ traceparent: `00-${hex}-${hex.slice(16)}-01` })) || ROOT_CONTEXT;
}

const fieldsOf = (metadata: { traceparent?: string; tracestate?: string }): TraceFields | undefined =>
  metadata.traceparent === undefined ? undefined : { traceparent: metadata.traceparent, ...(metadata.tracestate !== undefined && { tracestate: metadata.tracestate }) };

export function createExecutorTraces(o: { cached(executionId: string): { snapshot: ExecutionSnapshot } | undefined; now: () => number }): ExecutorTraces {
  /** executionId → the submit's context. */
  const submits = new Map<string, TraceFields>();
  /** handoff event id → the handoff span's context, and executionId → that handoff event id (to forget it). */
  const handoffs = new Map<string, TraceFields>();
  const handoffOf = new Map<string, string>();

  function forgetHandoff(executionId: string): void {
    const eventId = handoffOf.get(executionId);
    if (eventId === undefined) return;
    handoffs.delete(eventId);
    handoffOf.delete(executionId);
  }

  return {
    observe(change) {
      if (submits.size === 0 && handoffs.size === 0 && !activeTracer()) return;
      for (const { event, eventId } of change.events) {
        const fields = fieldsOf(event.metadata);
        if (!fields) continue;
        if (event.type === 'ExecutionRequested') submits.set(change.id, fields);
        else if (event.type === 'ExecutionHandedOff') {
          forgetHandoff(change.id);
          handoffs.set(eventId, fields);
          handoffOf.set(change.id, eventId);
        }
      }
      if (statusOf(change.after) !== 'Scheduled') forgetHandoff(change.id);
      if (isFinal(change.after)) submits.delete(change.id);
    },

    handoff({ executionId, action, workerId }) {
      const tracer = activeTracer();
      if (!tracer) return undefined;
      const held = o.cached(executionId)?.snapshot.context;
      const now = o.now();
      const attributes = { 'baton.execution_id': executionId, 'baton.action': action, 'baton.worker_id': workerId, ...(held && { 'baton.attempt': held.attempt }) };
      const parent = contextFrom(submits.get(executionId)) ?? untracedSubmit(executionId);
      const schedule = tracer.startSpan('baton.schedule', { attributes, startTime: waitingSince(held, now) }, parent);
      const handoff = tracer.startSpan('baton.handoff', { kind: SpanKind.PRODUCER, attributes }, trace.setSpan(parent, schedule));
      return {
        fields: traceFieldsOf(handoff),
        end({ attempt, handedOff, error }) {
          for (const span of [handoff, schedule]) {
            if (attempt !== undefined) span.setAttribute('baton.attempt', attempt);
            span.setAttribute('baton.handed_off', handedOff);
            if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
            span.end();
          }
        },
      };
    },

    publishing(transport) {
      const carry = (m: WorkMessage): WorkMessage => {
        const fields = m.traceparent === undefined ? handoffs.get(m.messageId) : undefined;
        return fields ? { ...m, ...fields } : m;
      };
      return { ...transport, publish: (messages) => transport.publish(handoffs.size === 0 ? messages : messages.map(carry)) };
    },
  };
}
