// An executor (and the workflow orchestrator inside it) SIGKILLed in the middle of a 20-step
// workflow, as real processes: a second executor catches up from the events and finishes the
// workflow; every step has exactly one execution and every execution started exactly once.
import { describe, expect, inject, it } from 'vitest';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../../schemas/events.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { submitWorkflow } from '../../src/workflow/service.ts';
import { loadWorkflow } from '../../src/workflow/workflow-stream.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { allEvents, eventually } from '../support/workflow-cluster.ts';
import { useTestStore } from '../support/test-store.ts';

/** 5 layers of 4 steps, each step after every step of the layer before: 20 steps of 400 ms. */
function layered() {
  const steps: { id: string; action: string; input: unknown; dependsOn: string[] }[] = [];
  for (let layer = 0; layer < 5; layer++) {
    for (let i = 0; i < 4; i++) {
      steps.push({ id: `l${layer}-${i}`, action: 'core.sleep', input: { ms: 400 }, dependsOn: layer === 0 ? [] : [0, 1, 2, 3].map((j) => `l${layer - 1}-${j}`) });
    }
  }
  return { name: 'crash-test', steps };
}

describe('workflow: executor SIGKILLed mid-workflow', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  // Default heartbeats (10 s, stale after 30 s, longer than this test waits): the second executor,
  // on the same host, sees the first one's process is gone and takes its partitions at once.
  const { start, diagnostics, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}) }));

  it(`a second executor finishes it: each step ran exactly once (${transport})`, async () => {
    const first = start('executor-1', ['executor', '--transport', transport, '--metrics-port', '0']);
    start('worker', ['worker', '--id', `wf-crash-${process.pid}`, '--capacity', '8', '--transport', transport, '--metrics-port', '0']);
    const runtime = createExecutionRuntime(t.store);
    const { workflowId } = await submitWorkflow({ store: t.store, runtime, actions: createActionRegistry(builtinActions) }, layered());

    // Kill the executor once the first layer finished and the second is under way.
    const count = (w: { events: { type: string }[] }, type: string) => w.events.filter((e) => e.type === type).length;
    const atKill = await eventually('the first layer to finish and the second to be scheduled', async () => {
      const w = await loadWorkflow(t.store, workflowId);
      return count(w, 'WorkflowStepFinished') >= 4 && count(w, 'WorkflowStepScheduled') >= 8 ? w : undefined;
    }, 25_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${diagnostics()}`);
    });
    first.proc.kill('SIGKILL');
    await first.exited;
    expect(atKill.snapshot.status, 'killed before the workflow ended').toBe('active');
    const finishedBeforeKill = count(atKill, 'WorkflowStepFinished');
    expect(count(atKill, 'WorkflowStepScheduled'), 'steps were in flight when it died').toBeGreaterThan(finishedBeforeKill);

    start('executor-2', ['executor', '--transport', transport, '--metrics-port', '0']);
    const done = await eventually('the workflow to end', async () => {
      const w = await loadWorkflow(t.store, workflowId);
      return w.snapshot.status === 'done' ? w : undefined;
    }, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${diagnostics()}`);
    });
    expect(done.snapshot.value, diagnostics()).toBe('Completed');
    expect(finishedBeforeKill).toBeLessThan(20); // the second executor recorded the rest

    // Every step: one execution, recorded once, started once, completed.
    const types = done.events.map((e) => e.type);
    expect(types.filter((t) => t === 'WorkflowStepScheduled')).toHaveLength(20);
    expect(types.filter((t) => t === 'WorkflowStepFinished')).toHaveLength(20);
    const events = await allEvents(t.store, [EXECUTION_STREAM_PREFIX]);
    const mine = new Set(
      events.filter((e) => e.type === 'ExecutionRequested' && (e.data as { workflowId?: string }).workflowId === workflowId).map((e) => executionIdOfStream(e.streamId)!),
    );
    expect(mine.size).toBe(20);
    const recorded = new Set(Object.values(done.snapshot.context.steps).map((s) => s.executionId));
    expect(recorded).toEqual(mine);
    for (const id of mine) {
      const stream = events.filter((e) => executionIdOfStream(e.streamId) === id);
      expect(stream.filter((e) => e.type === 'ExecutionStarted'), id).toHaveLength(1);
      expect(stream.at(-1)!.type, id).toBe('ExecutionCompleted');
    }
  }, 60_000);
});
