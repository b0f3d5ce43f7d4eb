// submitExecution continues the caller's trace: a W3C `traceparent` header makes the submit span
// its child, and ExecutionRequested records the submit span's context (the executor and worker
// continue it from there: test/e2e/traces.test.ts).
import { randomBytes } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { CSRF_HEADER, gql, useApi } from './api-harness.ts';

const SUBMIT = `mutation { submitExecution(action: "core.noop") { executionId } }`;

describe('traces through the GraphQL API', () => {
  const api = useApi();
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  beforeAll(() => provider.register());
  afterAll(async () => {
    trace.disable();
    await provider.shutdown();
  });

  const submit = async (headers: Record<string, string> = {}) => {
    const r = await gql<{ submitExecution: { executionId: string } }>(api().url, SUBMIT, {}, { headers: { [CSRF_HEADER]: '1', ...headers } });
    expect(r.errors, r.text).toBeUndefined();
    const id = r.data!.submitExecution.executionId;
    const [requested] = await api().store.readStream(executionStreamId(id));
    const span = exporter.getFinishedSpans().find((s) => s.name === 'baton.submit' && s.attributes['baton.execution_id'] === id);
    return { traceparent: requested!.metadata.traceparent as string, span: span! };
  };

  it('a traceparent header makes the submit a child of the caller’s span', async () => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const { traceparent, span } = await submit({ traceparent: `00-${traceId}-${callerSpan}-01` });
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.spanId).toBe(callerSpan);
    expect(traceparent).toBe(`00-${traceId}-${span.spanContext().spanId}-01`);
  });

  it('without one (or with a malformed one) the submit starts a trace of its own', async () => {
    for (const headers of [{}, { traceparent: 'not-a-traceparent' }] as Record<string, string>[]) {
      const { traceparent, span } = await submit(headers);
      expect(span.parentSpanContext).toBeUndefined();
      expect(traceparent).toBe(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`);
    }
  });
});
