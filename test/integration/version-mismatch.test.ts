// A worker handed an attempt for another version than it runs (its id restarted with new code
// between the handoff and the delivery) hands the baton back instead of starting: the machine
// would refuse its start, and the executor retries the attempt on a worker of the right version.
import pino from 'pino';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { offeredNames } from '../../src/input/action-versions.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import type { Delivery, WorkMessage } from '../../src/transport/work-transport.ts';
import { runDelivery } from '../../src/worker/run-delivery.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';

const WORKER = 'mismatch-w1';
const ran: number[] = [];
const at = (version: number) => createActionRegistry([defineAction({ name: 'demo.versioned', version, input: z.null(), run: () => void ran.push(version) })]);

describe('a delivery for another version than the worker runs', () => {
  const published: WorkMessage[] = [];
  const cluster = useInProcessExecutor({
    republishAfterMs: 60_000,
    transport: (real) => ({ ...real, publish: async (messages) => (published.push(...messages), real.publish(messages)) }),
  });

  it('is handed back with a reason naming both versions, never started', { timeout: 30_000 }, async () => {
    const { store, liveness, runtime } = cluster();
    await recordWorkerEvent(createWorkerRuntime(store), WORKER, 'WorkerStarted', { actions: ['demo.versioned'], runtimes: ['node'], capacity: 10, policies: { 'demo.versioned': { version: 2 } } });
    await liveness.beat({ workerId: WORKER, actions: offeredNames('demo.versioned', 2), runtimes: ['node'], capacity: 10, inFlight: 0, draining: false }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'demo.versioned', input: null, actionVersion: 2 });
    const message = await eventually('the handoff published', async () => published.find((m) => m.executionId === executionId), 10_000);
    expect(message.execution).toMatchObject({ context: { pinnedVersion: 2, actionVersion: 2 } });

    const settled: string[] = [];
    const delivery: Delivery = { message, deliveryCount: 1, ack: async () => void settled.push('ack'), nak: async () => void settled.push('nak'), term: async () => void settled.push('term'), working: async () => undefined };
    // The same worker id, now running version 3.
    await runDelivery(delivery, { workerId: WORKER, runtime: createExecutionRuntime(store), actions: at(3), log: pino({ level: 'silent' }), shutdown: new AbortController().signal, running: new Set<string>() });
    expect(settled).toEqual(['term']);
    expect(ran).toEqual([]);
    const types = (await store.readStream(executionStreamId(executionId))).map((e) => [e.type, (e.data as { reason?: string }).reason]);
    expect(types).toContainEqual(['OwnershipReleased', `worker ${WORKER} runs demo.versioned@3, not version 2`]);
    expect(types.map(([t]) => t)).not.toContain('ExecutionStarted');
  });
});
