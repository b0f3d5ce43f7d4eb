// The tracing helpers (src/observability/tracing.ts, executor-traces.ts): nothing without a
// registered provider; with one, the W3C fields round-trip, the executor's schedule span hangs
// from the recorded submit and starts when the attempt began to wait, and the work messages it
// publishes carry the handoff's context. Across real processes: test/e2e/traces.test.ts.
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { ExecutionHandedOff, ExecutionRequested, TRACEPARENT, type ExecutionEvent } from '../../schemas/events.ts';
import { createExecutorTraces, untracedSubmit, waitingSince } from '../../src/observability/executor-traces.ts';
import { activeTracer, contextFrom, traceFieldsOf, traceOutcome, traceRun, traceSubmit, traceSubmitMany } from '../../src/observability/tracing.ts';
import type { Change } from '../../src/runtime/actor-runtime.ts';
import type { WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';

const requested = (traceparent?: string) =>
  ExecutionRequested.parse({
    type: 'ExecutionRequested',
    data: { action: 'core.noop', input: null, maxAttempts: 3 },
    metadata: { by: 'executor', occurredAt: '2026-01-01T00:00:00.000Z', ...(traceparent && { traceparent }) },
  });

describe('tracing without a provider', () => {
  it('records nothing and runs the work bare', async () => {
    expect(activeTracer()).toBeUndefined();
    let seen: unknown;
    const r = await traceSubmit({ action: 'a' }, async (fields) => ((seen = fields), { executionId: 'e1', created: true }));
    expect(r).toEqual({ executionId: 'e1', created: true });
    expect(seen).toEqual({});
    expect(await traceOutcome({ message: { executionId: 'e1' } }, 'ExecutionCompleted', async (fields) => fields)).toEqual({});
    const traces = createExecutorTraces({ cached: () => undefined, now: Date.now });
    expect(traces.handoff({ executionId: 'e1', action: 'a', workerId: 'w' })).toBeUndefined();
     expect(await traceSubmitMany([{ action: 'a' }, { action: 'b' }], async (fields) => fields.map(() => ({ ok: false as const, error: fields })))).toEqual([
      { ok: false, error: [{}, {}] },
      { ok: false, error: [{}, {}] },
    ]);
  });
});

describe('tracing with a provider', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => void trace.setGlobalTracerProvider(provider));
  afterAll(() => trace.disable());

  it('writes W3C traceparents that read back as the same span', async () => {
    let fields: { traceparent?: string } = {};
    await traceSubmit({ action: 'core.noop' }, async (f) => ((fields = f), { executionId: 'e1', created: true }));
    expect(fields.traceparent).toMatch(TRACEPARENT);
    const [submit] = exporter.getFinishedSpans();
    expect(submit!.name).toBe('baton.submit');
    expect(submit!.attributes).toMatchObject({ 'baton.execution_id': 'e1', 'baton.action': 'core.noop', 'baton.created': true });
    const back = trace.getSpanContext(contextFrom(fields)!)!;
    expect(back).toMatchObject({ traceId: submit!.spanContext().traceId, spanId: submit!.spanContext().spanId, isRemote: true });
    expect(traceFieldsOf(trace.wrapSpanContext(back))).toEqual(fields);
  });

  it('a batch: one submit span per request, each ended with its own outcome', async () => {
    exporter.reset();
    const conflict = new Error('idempotency key conflict');
    const outcomes = await traceSubmitMany([{ action: 'core.noop' }, { action: 'core.echo', idempotencyKey: 'k' }], async (fields) => {
      expect(fields).toHaveLength(2);
      expect(fields[0]!.traceparent).toMatch(TRACEPARENT);
      expect(fields[1]!.traceparent).not.toBe(fields[0]!.traceparent);
      return [{ ok: true as const, result: { executionId: 'b1', created: true } }, { ok: false as const, error: conflict }];
    });
    expect(outcomes[1]).toEqual({ ok: false, error: conflict });
    const [first, second] = exporter.getFinishedSpans();
    expect(first!.attributes).toMatchObject({ 'baton.action': 'core.noop', 'baton.execution_id': 'b1', 'baton.created': true });
    expect(first!.status.code).toBe(0);
    expect(second!.attributes).toMatchObject({ 'baton.action': 'core.echo', 'baton.idempotent': true });
    expect(second!.status).toMatchObject({ code: 2, message: 'idempotency key conflict' });
  });

  it('ignores trace context that is not well-formed', () => {
    for (const traceparent of [undefined, 42, '', 'garbage', `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`, `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`, `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01`]) {
      expect(contextFrom({ traceparent })).toBeUndefined();
    }
  });

  it('the executor hangs each attempt from the submit and publishes the handoff context', async () => {
    exporter.reset();
    let submitFields: { traceparent?: string } = {};
    await traceSubmit({ action: 'core.noop' }, async (f) => ((submitFields = f), { executionId: 'e2', created: true }));
    const event = requested(submitFields.traceparent);
    const snapshot = startExecution(event);
    const traces = createExecutorTraces({ cached: () => ({ snapshot }), now: () => Date.parse('2026-01-01T00:00:05.000Z') });
    traces.observe({ id: 'e2', before: undefined, after: snapshot, source: 'observed', events: [{ event, eventId: 'r', revision: 0n }] } as Change<ExecutionSnapshot, ExecutionEvent>);

    const handoff = traces.handoff({ executionId: 'e2', action: 'core.noop', workerId: 'w1' })!;
    expect(handoff.fields.traceparent).toMatch(TRACEPARENT);
    const handedOff = ExecutionHandedOff.parse({
      type: 'ExecutionHandedOff',
      data: { workerId: 'w1', attempt: 1, deadline: '2026-01-01T00:01:00.000Z' },
      metadata: { by: 'executor', occurredAt: '2026-01-01T00:00:05.000Z', ...handoff.fields },
    });
    const scheduled = { ...snapshot, value: 'Scheduled' } as unknown as ExecutionSnapshot;
    traces.observe({ id: 'e2', before: snapshot, after: scheduled, source: 'own', events: [{ event: handedOff, eventId: 'h1', revision: 2n }] } as Change<ExecutionSnapshot, ExecutionEvent>);
    handoff.end({ attempt: 1, handedOff: true });

    const published: WorkMessage[][] = [];
    const transport = traces.publishing({ publish: async (m: WorkMessage[]) => void published.push(m) } as unknown as WorkTransport);
    const message = { messageId: 'h1', executionId: 'e2', workerId: 'w1', runtime: 'node', action: 'core.noop', attempt: 1, handoffRevision: '2', publishedAt: '2026-01-01T00:00:05.000Z' };
    await transport.publish([message, { ...message, messageId: 'other' }]);
    expect(published[0]![0]!.traceparent).toBe(handoff.fields.traceparent);
    expect(published[0]![1]!.traceparent).toBeUndefined();

    // The run continues the handoff; its outcome hangs from the run.
    await traceRun({ message: published[0]![0]!, deliveryCount: 1 }, async () => undefined);
    const delivery = { message: published[0]![0]!, deliveryCount: 1 };
    await traceRun(delivery, () => traceOutcome(delivery, 'ExecutionCompleted', async () => undefined));

    const spans = exporter.getFinishedSpans();
    const byName = (n: string) => spans.filter((s) => s.name === n);
    const [submit] = byName('baton.submit');
    const [schedule] = byName('baton.schedule');
    const [handoffSpan] = byName('baton.handoff');
    const run = byName('baton.run')[1]!;
    const [outcome] = byName('baton.outcome');
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
    expect(schedule!.parentSpanContext?.spanId).toBe(submit!.spanContext().spanId);
    expect(handoffSpan!.parentSpanContext?.spanId).toBe(schedule!.spanContext().spanId);
    expect(run.parentSpanContext?.spanId).toBe(handoffSpan!.spanContext().spanId);
    expect(outcome!.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    // The schedule span starts when the attempt began to wait: the request, 5 s before the handoff.
    expect(schedule!.startTime[0]).toBe(Date.parse('2026-01-01T00:00:00.000Z') / 1000);
    expect(schedule!.attributes).toMatchObject({ 'baton.attempt': 1, 'baton.handed_off': true, 'baton.worker_id': 'w1' });

    // Past its handoff the execution is forgotten: a re-publish carries nothing stale.
    const running = { ...snapshot, value: 'Running' } as unknown as ExecutionSnapshot;
    traces.observe({ id: 'e2', before: scheduled, after: running, source: 'observed', events: [] } as unknown as Change<ExecutionSnapshot, ExecutionEvent>);
    await transport.publish([message]);
    expect(published[1]![0]!.traceparent).toBeUndefined();
  });

  it('an execution submitted without a trace gets its id as the trace id, every attempt in it', () => {
    exporter.reset();
    const executionId = '2b787efe-706d-5710-8ae1-099215df064f';
    const traces = createExecutorTraces({ cached: () => undefined, now: Date.now });
    for (const attempt of [1, 2]) traces.handoff({ executionId, action: 'core.noop', workerId: 'w1' })!.end({ attempt, handedOff: true });
    const schedules = exporter.getFinishedSpans().filter((s) => s.name === 'baton.schedule');
    expect(schedules.map((s) => s.spanContext().traceId)).toEqual(['2b787efe706d57108ae1099215df064f', '2b787efe706d57108ae1099215df064f']);
    expect(new Set(schedules.map((s) => s.parentSpanContext?.spanId))).toEqual(new Set(['8ae1099215df064f']));
    expect(trace.getSpanContext(untracedSubmit('not-a-uuid'))).toBeUndefined();
  });

  it('a retry waits from its due time, never from the future', () => {
    const now = Date.parse('2026-01-01T00:01:00.000Z');
    const c = { attempt: 2, requestedAt: '2026-01-01T00:00:00.000Z', retryAt: '2026-01-01T00:00:30.000Z', updatedAt: '2026-01-01T00:00:20.000Z' };
    expect(waitingSince(c, now)).toBe(Date.parse(c.retryAt));
    expect(waitingSince({ ...c, attempt: 1 }, now)).toBe(Date.parse(c.requestedAt));
    expect(waitingSince({ ...c, retryAt: '2026-01-01T00:05:00.000Z' }, now)).toBe(now);
    expect(waitingSince(undefined, now)).toBe(now);
  });
});
