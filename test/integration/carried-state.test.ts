// The work message carries the execution's state at the handoff (src/runtime/carried-execution.ts):
// a worker in another process starts the run from it without reading the stream, and falls back
// to the store when that state is stale (the stream moved on) or made by other rules.
import pino from 'pino';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { EventStore } from '../../src/eventstore/event-store.ts';
import { cancelExecution } from '../../src/runtime/cancel.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import type { Delivery, WorkMessage } from '../../src/transport/work-transport.ts';
import { runDelivery } from '../../src/worker/run-delivery.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';

const WORKER = 'carried-w1';
const ran: string[] = [];
const actions = createActionRegistry([
  defineAction({ name: 'carry.echo', input: z.object({ n: z.number() }), run: async (input, ctx) => (ran.push(ctx.executionId), input.n * 2) }),
]);

/** The store as a worker in its own process sees it, counting reads of execution streams. */
function countingStore(store: EventStore) {
  const reads = { n: 0 };
  const counted = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'readStream') {
        return (streamId: string, o?: object) => {
          if (streamId.startsWith('execution-')) reads.n++;
          return target.readStream(streamId, o);
        };
      }
      // A load reads the stream through the snapshot store when it has one (one round trip for both).
      if (prop === 'snapshots' && target.snapshots?.readWithEvents) {
        const snapshots = target.snapshots;
        return {
          ...snapshots,
          readWithEvents: (streamId: string, machineVersion: string) => {
            if (streamId.startsWith('execution-')) reads.n++;
            return snapshots.readWithEvents!(streamId, machineVersion);
          },
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { counted, reads };
}

/** A delivery as a transport hands it over, recording how it was settled. */
function deliveryOf(message: WorkMessage, deliveryCount = 1) {
  const settled: string[] = [];
  const delivery: Delivery = {
    message,
    deliveryCount,
    ack: async () => void settled.push('ack'),
    nak: async () => void settled.push('nak'),
    term: async () => void settled.push('term'),
    working: async () => undefined,
  };
  return { delivery, settled };
}

describe('the execution state a work message carries', () => {
  const published: WorkMessage[] = [];
  const cluster = useInProcessExecutor({
    scheduleToStartMs: 30_000,
    republishAfterMs: 60_000,
    transport: (real) => ({ ...real, publish: async (messages) => (published.push(...messages), real.publish(messages)) }),
  });

  async function handedOff(input: unknown): Promise<WorkMessage> {
    const { store, liveness, runtime } = cluster();
    // A worker that offers the action; this test delivers its work by hand.
    await recordWorkerEvent(createWorkerRuntime(store), WORKER, 'WorkerStarted', { actions: ['carry.echo'], runtimes: ['node'], capacity: 100 });
    await liveness.beat({ workerId: WORKER, actions: ['carry.echo'], runtimes: ['node'], capacity: 100, inFlight: 0, draining: false }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'carry.echo', input });
    return eventually('the handoff published', async () => published.find((m) => m.executionId === executionId), 10_000);
  }

  function workerDeps(store: EventStore) {
    return { workerId: WORKER, runtime: createExecutionRuntime(store), actions, log: pino({ level: 'silent' }), shutdown: new AbortController().signal, running: new Set<string>() };
  }

  it('is the state at the handoff revision, and the worker runs from it without reading the stream', async () => {
    const { store } = cluster();
    const message = await handedOff({ n: 21 });
    const events = await store.readStream(executionStreamId(message.executionId));
    expect(BigInt(message.handoffRevision)).toBe(events.at(-1)!.revision);
    expect(message.execution).toMatchObject({ value: 'Scheduled', context: { owner: `worker:${WORKER}`, attempt: 1, input: { n: 21 } } });

    const { counted, reads } = countingStore(store);
    const { delivery, settled } = deliveryOf(message);
    await runDelivery(delivery, workerDeps(counted));
    const after = await store.readStream(executionStreamId(message.executionId));
    expect(after.slice(-2).map((e) => e.type)).toEqual(['ExecutionStarted', 'ExecutionCompleted']);
    expect(after.at(-1)!.data).toMatchObject({ result: 42 });
    expect(settled).toEqual(['ack']);
    expect(reads.n, 'reads of the execution stream on the pickup path').toBe(0);
  });

  it('stale (a cancel was requested after the handoff): the worker reads the store and cancels instead of running', async () => {
    const { store, runtime } = cluster();
    const message = await handedOff({ n: 1 });
    expect(await cancelExecution(runtime, message.executionId, 'changed my mind')).toMatchObject({ outcome: 'cancel-requested' });
    const { counted, reads } = countingStore(store);
    const { delivery, settled } = deliveryOf(message);
    await runDelivery(delivery, workerDeps(counted));
    const after = await store.readStream(executionStreamId(message.executionId));
    expect(after.at(-1)).toMatchObject({ type: 'ExecutionCancelled', metadata: { by: `worker:${WORKER}` } });
    expect(ran).not.toContain(message.executionId);
    expect(settled).toEqual(['term']);
    expect(reads.n).toBeGreaterThan(0);
  });

  it('made by other rules (another machine version), or on a redelivery: the worker reads the store', async () => {
    const { store } = cluster();
    for (const variant of ['other-version', 'redelivery'] as const) {
      const message = await handedOff({ n: 5 });
      const sent = variant === 'other-version' ? { ...message, execution: { ...message.execution!, machineVersion: '0' } } : message;
      const { counted, reads } = countingStore(store);
      const { delivery, settled } = deliveryOf(sent, variant === 'redelivery' ? 2 : 1);
      await runDelivery(delivery, workerDeps(counted));
      const after = await store.readStream(executionStreamId(message.executionId));
      expect(after.at(-1), variant).toMatchObject({ type: 'ExecutionCompleted', data: { result: 10 } });
      expect(settled, variant).toEqual(['ack']);
      expect(reads.n, variant).toBeGreaterThan(0);
    }
  });
});
