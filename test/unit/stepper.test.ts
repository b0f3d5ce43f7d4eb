// The stepper (actors/stepper.ts) is how every machine is decided and folded: it must give
// exactly what xstate's own pure transition() gives, and it must never build the throwaway
// actor that runs a machine's context factory without input (11.6% of `baton bench`'s CPU).
import { afterEach, describe, expect, it } from 'vitest';
import { transition } from 'xstate';
import { decideExecution, executionMachine, foldExecution, startExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { decideWorker, foldWorker, startWorker, workerMachine } from '../../actors/worker.machine.ts';
import { decideWorkflow, startWorkflow, workflowMachine } from '../../actors/workflow.machine.ts';
import { generateExecutionPaths } from '../support/execution-paths.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { WorkerEvent } from '../../schemas/worker-events.ts';
import type { WorkflowEvent } from '../../schemas/workflow-events.ts';

const paths = generateExecutionPaths();

/** Counts the calls of a machine's context factory that came without an input. */
function watchContextFactory(machine: { config: { context?: unknown } }) {
  const original = machine.config.context as (args: { input: unknown }) => unknown;
  let withoutInput = 0;
  machine.config.context = (args: { input: unknown }) => {
    if (args.input === undefined) withoutInput++;
    return original(args);
  };
  return { withoutInput: () => withoutInput, restore: () => void (machine.config.context = original) };
}

describe('the stepper', () => {
  it('folds every generated execution path to exactly the snapshot xstate’s transition() gives', () => {
    expect(paths.length).toBeGreaterThan(300);
    for (const { events } of paths) {
      const [first, ...rest] = events;
      let reference = startExecution(first!);
      for (const e of rest) reference = transition(executionMachine, reference, e)[0];
      const stepped = foldExecution(events);
      expect({ value: stepped.value, status: stepped.status, context: stepped.context }).toEqual({ value: reference.value, status: reference.status, context: reference.context });
    }
  });

  it('decides each step of every path as xstate’s transition() does', () => {
    for (const { events } of paths.slice(0, 100)) {
      let snapshot: ExecutionSnapshot = startExecution(events[0]!);
      for (const e of events.slice(1)) {
        const d = decideExecution(snapshot, e);
        expect(d.ok).toBe(true);
        const [reference] = transition(executionMachine, snapshot, e);
        if (d.ok) expect(d.snapshot.context).toEqual(reference.context);
        if (d.ok) snapshot = d.snapshot;
      }
    }
  });
});

describe('the machines’ context factories on the hot path', () => {
  const watches: ReturnType<typeof watchContextFactory>[] = [];
  afterEach(() => watches.splice(0).forEach((w) => w.restore()));

  it('never run without input while executions are started, decided and folded', () => {
    const watch = watchContextFactory(executionMachine);
    watches.push(watch);
    for (const { events } of paths) {
      let snapshot = startExecution(events[0]!);
      for (const e of events.slice(1) as ExecutionEvent[]) {
        const d = decideExecution(snapshot, e);
        if (d.ok) snapshot = d.snapshot;
      }
      foldExecution(events);
    }
    expect(watch.withoutInput()).toBe(0);
    // The check can fail: xstate's own transition() builds the actor that calls it without input.
    try {
      transition(executionMachine, startExecution(paths[0]!.events[0]!), paths[0]!.events[1]!);
    } catch {
      // what it throws after the factory failed is not the point here
    }
    expect(watch.withoutInput()).toBeGreaterThan(0);
  });

  it('never run without input for workers and workflows either', () => {
    const workers = watchContextFactory(workerMachine);
    const workflows = watchContextFactory(workflowMachine);
    watches.push(workers, workflows);
    const meta = (by: string) => ({ by, occurredAt: '2026-01-01T00:00:00.000Z' });
    const started: WorkerEvent = { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 1 }, metadata: meta('worker:w1') } as WorkerEvent;
    const worker = decideWorker(startWorker('w1'), started);
    expect(worker.ok).toBe(true);
    foldWorker('w1', [started]);
    const wfStarted = { type: 'WorkflowStarted', data: { definition: { onFailure: 'fail-fast', steps: [{ id: 'a', action: 'core.noop', dependsOn: [] }] } }, metadata: meta('executor') } as WorkflowEvent;
    const wf = startWorkflow(wfStarted);
    const scheduled = { type: 'WorkflowStepScheduled', data: { stepId: 'a', executionId: '00000000-0000-4000-8000-000000000001' }, metadata: meta('executor') } as WorkflowEvent;
    expect(decideWorkflow(wf, scheduled).ok).toBe(true);
    expect(workers.withoutInput()).toBe(0);
    expect(workflows.withoutInput()).toBe(0);
  });
});
