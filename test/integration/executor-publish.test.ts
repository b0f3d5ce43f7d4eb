// What the executor puts on the wire: each work message carries the runtime tag its action's
// workers advertise (WorkerStarted.policies), on the first publish and on every re-publish.
import { describe, expect, it } from 'vitest';
import type { WorkMessage } from '../../src/transport/work-transport.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';

describe('work messages the executor publishes', () => {
  /** Every message the executor handed to the transport, in order. */
  const published: WorkMessage[] = [];
  const cluster = useInProcessExecutor({
    scheduleToStartMs: 20_000,
    republishAfterMs: 100,
    monitorEveryMs: 50,
    transport: (real) => ({
      ...real,
      async publish(messages) {
        published.push(...messages);
        await real.publish(messages);
      },
    }),
  });

  it('labels the message with the action\'s advertised runtime, not the worker\'s first one, and keeps it on re-publish', async () => {
    const { store, liveness, runtime } = cluster();
    // A worker with two runtimes whose action runs on the second; it takes no work, so the
    // handoff stays unstarted and the monitor re-publishes it.
    const runtimes = ['node', 'gpu'];
    await recordWorkerEvent(createWorkerRuntime(store), 'two-runtimes', 'WorkerStarted', { actions: ['render.frame'], runtimes, capacity: 4, policies: { 'render.frame': { runtime: 'gpu' } } });
    await liveness.beat({ workerId: 'two-runtimes', actions: ['render.frame'], runtimes, capacity: 4, inFlight: 0, draining: false }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'render.frame', input: null });
    const mine = await eventually('a first publish and a re-publish', async () => {
      const m = published.filter((x) => x.executionId === executionId);
      return m.length >= 2 ? m : undefined;
    }, 10_000);
    expect(mine.map((m) => m.runtime)).toEqual(mine.map(() => 'gpu'));
    expect(new Set(mine.map((m) => m.messageId)).size, 'a re-publish keeps the message id').toBe(1);
  });
});
