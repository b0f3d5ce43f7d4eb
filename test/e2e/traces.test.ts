// One trace across real processes: this test process submits (inside a span of its own, as a
// request handler would), an executor process and a worker process run the work, each with the
// tracing setup file a user would pass (`NODE_OPTIONS=--import`, here exporting to the SDK's
// in-memory exporter and writing its finished spans to a file when the process exits). The
// spans of all three must form one trace: request → submit → schedule → handoff → run →
// outcome, with a retried execution's attempts as sibling schedule spans under its submit.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

interface SpanRecord {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes: Record<string, unknown>;
  status: number;
}

const SETUP = path.resolve('test/fixtures/tracing/in-memory-setup.mjs');

describe('traces across processes', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'baton-traces-'));
  const spansFile = (name: string) => path.join(dir, `${name}.json`);
  const t = useTestStore({
    beforeClose: async () => {
      await killAll();
      trace.disable();
      await provider.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  });
  let runtime: ExecutionRuntime;
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const { start, diagnostics, killAll } = batonProcesses(() => ({
    BATON_DATABASE_URL: t.db.url,
    ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}),
  }));

  beforeAll(async () => {
    provider.register();
    runtime = createExecutionRuntime(t.store);
  });

  async function untilFinal(executionId: string, ms: number): Promise<void> {
    const until = Date.now() + ms;
    for (;;) {
      const { snapshot } = await runtime.load(executionId, { fresh: true });
      if (isFinal(snapshot)) return;
      if (Date.now() > until) throw new Error(`execution ${executionId} still ${statusOf(snapshot)} after ${ms} ms\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it(`one trace id spans submit, schedule, handoff, run and outcome; a retry is a sibling attempt (${transport})`, { timeout: 90_000 }, async () => {
    const traced = (name: string) => ({ NODE_OPTIONS: `--import ${SETUP}`, TRACES_TEST_SPANS_FILE: spansFile(name) });
    const executor = start('executor', ['executor', '--transport', transport, '--metrics-port', '0'], { env: traced('executor') });
    const worker = start('worker', ['worker', '--id', `traces-${randomUUID().slice(0, 8)}`, '--transport', transport, '--metrics-port', '0'], { env: traced('worker') });

    // As a request handler would: Baton's submit joins the caller's active span.
    const tracer = trace.getTracer('test');
    const submitted = await tracer.startActiveSpan('request', async (request) => {
      const ok = await runtime.submit({ action: 'core.noop', input: null });
      const failing = await runtime.submit({ action: 'core.fail', input: { message: 'planned', retryable: true }, maxAttempts: 2 });
      request.end();
      return { ok: ok.executionId, failing: failing.executionId };
    });
    await untilFinal(submitted.ok, 30_000);
    await untilFinal(submitted.failing, 45_000);

    for (const p of [executor, worker]) p.proc.kill('SIGTERM');
    await Promise.all([executor.exitWithin(20_000), worker.exitWithin(20_000)]);
    const own: SpanRecord[] = exporter.getFinishedSpans().map((s) => ({
      name: s.name,
      traceId: s.spanContext().traceId,
      spanId: s.spanContext().spanId,
      parentSpanId: s.parentSpanContext?.spanId,
      attributes: s.attributes,
      status: s.status.code,
    }));
    const read = (name: string): SpanRecord[] => JSON.parse(readFileSync(spansFile(name), 'utf8')) as SpanRecord[];
    const executorSpans = read('executor');
    const workerSpans = read('worker');

    const [request] = own.filter((s) => s.name === 'request');
    const forExecution = (spans: SpanRecord[], name: string, executionId: string) => spans.filter((s) => s.name === name && s.attributes['baton.execution_id'] === executionId);
    const childrenOf = (spans: SpanRecord[], parent: SpanRecord, name: string) => spans.filter((s) => s.name === name && s.parentSpanId === parent.spanId);

    for (const [executionId, attempts, outcome] of [
      [submitted.ok, 1, 'ExecutionCompleted'],
      [submitted.failing, 2, 'ExecutionFailed'],
    ] as const) {
      const [submit, ...moreSubmits] = forExecution(own, 'baton.submit', executionId);
      expect(moreSubmits, diagnostics()).toHaveLength(0);
      expect(submit!.parentSpanId).toBe(request!.spanId);
      // The attempts: sibling schedule spans under the submit, in the executor's process.
      const schedules = childrenOf(executorSpans, submit!, 'baton.schedule');
      expect(schedules.map((s) => s.attributes['baton.attempt']).sort(), diagnostics()).toEqual(attempts === 1 ? [1] : [1, 2]);
      for (const schedule of schedules) {
        const [handoff] = childrenOf(executorSpans, schedule, 'baton.handoff');
        expect(handoff, `handoff of attempt ${schedule.attributes['baton.attempt']}`).toBeDefined();
        // The worker's process continues the handoff's context.
        const [run] = childrenOf(workerSpans, handoff!, 'baton.run');
        expect(run, `run of attempt ${schedule.attributes['baton.attempt']}`).toBeDefined();
        expect(run!.attributes['baton.attempt']).toBe(schedule.attributes['baton.attempt']);
        const [end] = childrenOf(workerSpans, run!, 'baton.outcome');
        expect(end!.attributes['baton.outcome']).toBe(outcome);
      }
      // One trace id from the request to the last outcome, across the three processes.
      const all = [...own, ...executorSpans, ...workerSpans].filter((s) => s.attributes['baton.execution_id'] === executionId);
      expect(all.length).toBe(1 + attempts * 4);
      expect(new Set(all.map((s) => s.traceId))).toEqual(new Set([request!.traceId]));

      // The history records the context: the request names the submit, each handoff its span.
      const events = await t.store.readStream(executionStreamId(executionId));
      const spanOf = (e: (typeof events)[number]) => String(e.metadata.traceparent ?? '').split('-')[2];
      expect(spanOf(events.find((e) => e.type === 'ExecutionRequested')!)).toBe(submit!.spanId);
      const handoffSpanIds = events.filter((e) => e.type === 'ExecutionHandedOff').map(spanOf);
      expect(handoffSpanIds.sort()).toEqual(executorSpans.filter((s) => s.name === 'baton.handoff' && s.attributes['baton.execution_id'] === executionId).map((s) => s.spanId).sort());
    }
  });
});
