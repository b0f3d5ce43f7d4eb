// Flat machine steps (actors/flat-steps.ts) stand in for xstate's macrostep on the hot path: they
// must give exactly the snapshot xstate gives, refusals included (the very snapshot back), for
// every reachable state of every machine and every event we can name there. Each check compares
// with xstate's own pure transition()/initialTransition().
import { describe, expect, it } from 'vitest';
import { assign, initialTransition, setup, transition, type AnyMachineSnapshot, type AnyStateMachine, type EventObject } from 'xstate';
import { executionMachine, SAMPLE_REQUEST } from '../../actors/execution.machine.ts';
import { partitionLeaseMachine } from '../../actors/partition-lease.machine.ts';
import { rateBucketMachine } from '../../actors/rate-bucket.machine.ts';
import { scheduleMachine } from '../../actors/schedule.machine.ts';
import { stepperOf, type Stepper } from '../../actors/stepper.ts';
import { workerMachine } from '../../actors/worker.machine.ts';
import { workflowMachine } from '../../actors/workflow.machine.ts';
import { WorkflowEvent } from '../../schemas/workflow-events.ts';
import { ev as executionEv, generateExecutionPaths, pathAlphabet } from '../support/execution-paths.ts';
import { ev as scheduleEv, generateSchedulePaths, scheduleAlphabet } from '../support/schedule-paths.ts';

/** Everything a snapshot says, in comparable form. */
const shape = (s: AnyMachineSnapshot) => ({
  value: s.value,
  status: s.status,
  context: s.context,
  output: s.output,
  error: s.error,
  tags: [...s.tags].sort(),
  // A set: xstate's order follows its exit and entry sets, and nothing reads it as a list.
  nodes: s._nodes.map((n: { id: string }) => n.id).sort(),
  children: s.children,
  historyValue: s.historyValue,
  can: typeof s.can,
});

function expectSameStep(machine: AnyStateMachine, stepper: Stepper<AnyStateMachine>, before: AnyMachineSnapshot, event: EventObject): AnyMachineSnapshot {
  const [reference] = transition(machine, before, event);
  const stepped = stepper.next(before, event);
  // A refusal is the very snapshot given; a taken transition never is (every one of ours assigns).
  expect(stepped === before, `${event.type} in ${JSON.stringify(before.value)}`).toBe(reference === before);
  expect(shape(stepped)).toEqual(shape(reference));
  return stepped;
}

/** Every event of `alphabet` on every snapshot; how many of those steps took a transition. */
function expectSameSteps(machine: AnyStateMachine, stepper: Stepper<AnyStateMachine>, snapshots: readonly AnyMachineSnapshot[], alphabet: readonly EventObject[]): number {
  let taken = 0;
  for (const snapshot of snapshots) {
    for (const event of alphabet) if (expectSameStep(machine, stepper, snapshot, event) !== snapshot) taken++;
  }
  return taken;
}

describe('flat machine steps', () => {
  it('are what every one of our machines takes (none falls back to xstate’s macrostep)', () => {
    const machines: [AnyStateMachine, unknown][] = [
      [executionMachine, SAMPLE_REQUEST],
      [scheduleMachine, scheduleEv.created()],
      [workerMachine, { workerId: 'w1' }],
      [workflowMachine, undefined],
      [rateBucketMachine, undefined],
      [partitionLeaseMachine, undefined],
    ];
    for (const [machine, sample] of machines) expect(stepperOf(machine, sample as never).flat, machine.id).toBe(true);
  });

  it('start an execution as xstate does, a start that cannot build a context included (status error)', () => {
    const stepper = stepperOf(executionMachine as AnyStateMachine, SAMPLE_REQUEST);
    const broken = { type: 'ExecutionRequested', metadata: SAMPLE_REQUEST.metadata } as unknown as typeof SAMPLE_REQUEST;
    for (const input of [executionEv.requested({ maxAttempts: 2 }), SAMPLE_REQUEST, executionEv.requested({ maxAttempts: 1 }), broken]) {
      expect(shape(stepper.initial(input))).toEqual(shape(initialTransition(executionMachine, input)[0]));
    }
    expect(stepper.initial(broken).status).toBe('error');
  });

  it('step every reachable execution state on every event of the paths’ alphabet as xstate does, refusals included', () => {
    const stepper = stepperOf(executionMachine as AnyStateMachine, SAMPLE_REQUEST);
    // Every other reachable state (~650 of ~1,300, every state of the machine among them): xstate's
    // pure transition() builds an actor per call, ~0.1 ms, and all of them would take ~8 s.
    const snapshots = generateExecutionPaths()
      .map((p) => p.finalSnapshot as AnyMachineSnapshot)
      .filter((_, i) => i % 2 === 0);
    const alphabet = pathAlphabet();
    expect(new Set(snapshots.map((s) => s.value)).size).toBe(Object.keys(executionMachine.root.states).length);
    const taken = expectSameSteps(executionMachine, stepper, snapshots, alphabet);
    // Both kinds were checked: transitions taken and refused.
    expect(taken).toBeGreaterThan(500);
    expect(taken).toBeLessThan(snapshots.length * alphabet.length);
  });

  it('step every reachable schedule state on every event of its alphabet as xstate does', () => {
    const stepper = stepperOf(scheduleMachine as AnyStateMachine, scheduleEv.created());
    const snapshots = generateSchedulePaths().map((p) => p.final as AnyMachineSnapshot);
    expect(shape(stepper.initial(scheduleEv.created()))).toEqual(shape(initialTransition(scheduleMachine, scheduleEv.created())[0]));
    expect(expectSameSteps(scheduleMachine, stepper, snapshots, scheduleAlphabet())).toBeGreaterThan(10);
  });

  it('step workers, workflows, rate buckets and partition leases as xstate does', () => {
    const meta = (by: string, occurredAt = '2026-01-01T00:00:00.000Z') => ({ by, occurredAt });
    const walk = (machine: AnyStateMachine, input: unknown, events: EventObject[]) => {
      const stepper = stepperOf(machine, input as never);
      let snapshot = stepper.initial(input);
      expect(shape(snapshot)).toEqual(shape(initialTransition(machine, input as never)[0]));
      const seen = [snapshot];
      for (const event of events) seen.push((snapshot = expectSameStep(machine, stepper, snapshot, event)));
      // Every event again on every state the walk went through: the refusals.
      return expectSameSteps(machine, stepper, seen, events);
    };
    const workerEvents = [
      { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 2, host: 'h', pid: 1 }, metadata: meta('worker:w1') },
      { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 2 }, metadata: meta('worker:w2') },
      { type: 'WorkerDraining', data: { reason: 'SIGTERM' }, metadata: meta('worker:w1') },
      { type: 'WorkerStopped', data: { reason: 'drained' }, metadata: meta('worker:w1') },
      { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 3 }, metadata: meta('worker:w1', '2026-01-01T00:01:00.000Z') },
      { type: 'WorkerLost', data: { lastHeartbeatAt: '2026-01-01T00:01:00.000Z', reason: 'no heartbeat' }, metadata: meta('executor', '2026-01-01T00:02:00.000Z') },
    ];
    expect(walk(workerMachine, { workerId: 'w1' }, workerEvents)).toBeGreaterThan(3);

    const wf = (type: string, data: unknown) => WorkflowEvent.parse({ type, data, metadata: meta('executor') }) as EventObject;
    const started = wf('WorkflowStarted', { definition: { onFailure: 'fail-fast', steps: [{ id: 'a', action: 'core.noop', dependsOn: [] }, { id: 'b', action: 'core.noop', dependsOn: ['a'] }] } });
    const id = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;
    const workflowEvents = [
      wf('WorkflowStepScheduled', { stepId: 'a', executionId: id(1) }),
      wf('WorkflowStepScheduled', { stepId: 'b', executionId: id(2) }),
      wf('WorkflowStepFinished', { stepId: 'a', executionId: id(1), outcome: 'Completed', result: 1 }),
      wf('WorkflowStepScheduled', { stepId: 'b', executionId: id(2) }),
      wf('WorkflowStepFinished', { stepId: 'b', executionId: id(2), outcome: 'Failed', error: { message: 'x' } }),
      wf('WorkflowCancelRequested', { reason: 'enough' }),
      wf('WorkflowFailed', { reason: 'b failed', failedSteps: ['b'] }),
      wf('WorkflowCompleted', {}),
    ];
    expect(walk(workflowMachine, started, workflowEvents)).toBeGreaterThan(3);

    const grant = (at: number, count: number) => ({ type: 'RateTokensGranted', data: { at: new Date(at).toISOString(), count, limit: 3, windowMs: 1_000 }, metadata: meta('executor', new Date(at).toISOString()) });
    expect(walk(rateBucketMachine, undefined, [grant(0, 2), grant(100, 1), grant(200, 1), grant(1_500, 3)])).toBeGreaterThan(1);

    const leases = (type: string, data: unknown) => ({ type, data, metadata: meta('executor') });
    const leaseEvents = [
      leases('PartitionsClaimed', { executorId: 'e1', partitionCount: 4, partitions: [0, 1] }),
      leases('PartitionsClaimed', { executorId: 'e2', partitionCount: 4, partitions: [1, 2] }),
      leases('PartitionsTakenOver', { executorId: 'e2', from: 'e1', partitions: [1], lastHeartbeatAt: null }),
      leases('PartitionsReleased', { executorId: 'e2', partitions: [1], reason: 'rebalance' }),
    ];
    expect(walk(partitionLeaseMachine, undefined, leaseEvents)).toBeGreaterThan(1);
  });

  it('leave a machine they do not cover to xstate, and cover object assigns and actionless transitions in one they do', () => {
    const withEntry = setup({ types: { context: {} as { n: number }, events: {} as { type: 'go' } } }).createMachine({
      context: { n: 0 },
      initial: 'a',
      states: { a: { on: { go: 'b' } }, b: { entry: assign({ n: ({ context }) => context.n + 1 }) } },
    });
    const entryStepper = stepperOf(withEntry as AnyStateMachine, undefined as never);
    expect(entryStepper.flat).toBe(false);
    const b = entryStepper.next(entryStepper.initial(undefined), { type: 'go' });
    expect(b.context).toEqual({ n: 1 }); // the entry action ran: xstate stepped it

    const nested = setup({}).createMachine({ context: () => ({}), initial: 'a', states: { a: { initial: 'x', states: { x: {} } } } });
    expect(stepperOf(nested as AnyStateMachine, undefined as never).flat).toBe(false);

    type E = { type: 'inc'; by: number } | { type: 'poke' } | { type: 'stop' };
    const flat = setup({ types: { context: {} as { n: number; last?: string }, events: {} as E, input: {} as { n: number } } }).createMachine({
      context: ({ input }) => ({ n: input.n }),
      initial: 'on',
      states: {
        on: {
          on: {
            inc: [
              { guard: ({ event }) => event.by > 10, target: 'off', actions: assign({ n: 0, last: 'reset' }) },
              { actions: assign({ n: ({ context, event }) => context.n + event.by }) },
            ],
            poke: {},
            stop: 'off',
          },
        },
        off: { type: 'final' },
      },
    });
    const stepper = stepperOf(flat as AnyStateMachine, { n: 0 } as never);
    expect(stepper.flat).toBe(true);
    let s = stepper.initial({ n: 2 });
    expect(shape(s)).toEqual(shape(initialTransition(flat, { n: 2 })[0]));
    for (const event of [{ type: 'inc', by: 3 }, { type: 'poke' }, { type: 'nope' }, { type: 'inc', by: 11 }, { type: 'inc', by: 1 }] as EventObject[]) {
      s = expectSameStep(flat, stepper, s, event);
    }
    expect(s.status).toBe('done');
    expect(expectSameStep(flat, stepper, stepper.initial({ n: 1 }), { type: 'stop' }).value).toBe('off');
  });
});
