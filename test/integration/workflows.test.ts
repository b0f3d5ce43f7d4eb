// Workflows against a real executor, worker and event store (Postgres, and NATS when reachable):
// bad definitions write nothing; a 50-step fan-out/fan-in DAG runs each step once, after all
// its parents, with inputs mapped from their results, while two orchestrators race; fail-fast,
// continue and cancel end the way the plan says; a crash between submitting a step and
// recording it leaves one execution, which the successor records.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream, executionStreamId } from '../../schemas/events.ts';
import { WORKFLOW_STREAM_PREFIX, workflowStreamId } from '../../schemas/workflow-events.ts';
import { NotFoundError } from '../../src/errors.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, executionIdForKey } from '../../src/runtime/execution-runtime.ts';
import { silentLogger } from '../../src/log.ts';
import { startOrchestrator, stepExecutionKey } from '../../src/workflow/orchestrator.ts';
import { InvalidWorkflowError, WorkflowIdConflictError, cancelWorkflow, submitWorkflow, workflowStatus } from '../../src/workflow/service.ts';
import { createWorkflowRuntime, loadWorkflow } from '../../src/workflow/workflow-stream.ts';
import { advance, type RoundDeps } from '../../src/workflow/workflow-round.ts';
import { useTestDatabase } from '../support/test-db.ts';
import { allEvents, badWorkflows, eventually, startWorkflowCluster, workflowActions, workflowEnded, type WorkflowCluster } from '../support/workflow-cluster.ts';

const natsUrl = inject('natsUrl');

describe('submitWorkflow refuses bad definitions and writes nothing', () => {
  const db = useTestDatabase();
  const deps = () => {
    const store = createPostgresEventStore(db().pool);
    return { store, runtime: createExecutionRuntime(store), actions: workflowActions };
  };

  it.each(badWorkflows)('$name', async ({ definition, expect: message }) => {
    const err = await submitWorkflow(deps(), definition).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    expect((err as Error).message).toMatch(message);
    const { rows } = await db().pool.query('SELECT count(*)::int AS n FROM baton_events');
    expect(rows[0].n).toBe(0);
  });

  it('lists every problem at once, with its path, including step inputs that do not fit their action', async () => {
    const err = (await submitWorkflow(deps(), {
      onFailure: 'sometimes',
      steps: [{ id: 'a', action: 'core.sleep', input: { ms: -5 } }, { id: 'b', action: 'nope', dependsOn: ['a', 'zz'] }],
    }, { id: 'bad id!' }).catch((e: unknown) => e)) as InvalidWorkflowError;
    expect(err).toBeInstanceOf(InvalidWorkflowError);
    // One round: the fields' problems and the graph's and the inputs' together.
    expect(err.problems.map((p) => p.path)).toEqual(['id', 'onFailure', 'steps.1.action', 'steps.1.dependsOn.1', 'steps.0.input.ms']);
    const err2 = (await submitWorkflow(deps(), { steps: [{ id: 'a', action: 'core.sleep', input: { ms: -5 } }, { id: 'b', action: 'nope', dependsOn: ['a', 'zz'] }] }).catch((e: unknown) => e)) as InvalidWorkflowError;
    expect(err2.problems.map((p) => p.path)).toEqual(['steps.1.action', 'steps.1.dependsOn.1', 'steps.0.input.ms']);
    const { rows } = await db().pool.query('SELECT count(*)::int AS n FROM baton_events');
    expect(rows[0].n).toBe(0);
  });

  it('is idempotent under a caller-given id, and refuses the id with another definition', async () => {
    const definition = { name: 'twice', steps: [{ id: 'a', action: 'core.noop' }] };
    const first = await submitWorkflow(deps(), definition, { id: 'nightly-2026-11-21' });
    expect(first).toMatchObject({ workflowId: 'nightly-2026-11-21', created: true, status: 'Running', steps: 1 });
    expect(await submitWorkflow(deps(), definition, { id: 'nightly-2026-11-21' })).toMatchObject({ created: false });
    await expect(submitWorkflow(deps(), { ...definition, name: 'other' }, { id: 'nightly-2026-11-21' })).rejects.toBeInstanceOf(WorkflowIdConflictError);
    // The same definition in another namespace: refused for what it is, not as another definition.
    await expect(submitWorkflow(deps(), definition, { id: 'nightly-2026-11-21', namespace: 'team-b' })).rejects.toThrow(
      'workflow id "nightly-2026-11-21" is already used by a workflow with the same definition in namespace "default" (a workflow id is one per store, across namespaces)',
    );
    expect(await submitWorkflow(deps(), definition, { id: 'nightly-2026-11-21', namespace: 'default' })).toMatchObject({ created: false });
    expect(await deps().store.readStream(workflowStreamId('nightly-2026-11-21'))).toHaveLength(1);
    await expect(workflowStatus(deps(), 'no-such-workflow')).rejects.toBeInstanceOf(NotFoundError);
  });
});

/** 50 steps: a root fans out to 12 branches of 3 echo steps, which fan in to one sink, then 12 more. Values travel through inputFrom. */
function fanOutFanIn() {
  const steps: Record<string, unknown>[] = [{ id: 'root', action: 'core.echo', input: { tag: 'from-root' } }];
  for (let b = 0; b < 12; b++) {
    steps.push(
      { id: `b${b}-1`, action: 'core.echo', dependsOn: ['root'], input: { branch: b }, inputFrom: { tag: 'root.result.tag' } },
      { id: `b${b}-2`, action: 'core.echo', dependsOn: [`b${b}-1`], inputFrom: { branch: `b${b}-1.result.branch`, tag: `b${b}-1.result.tag` } },
      { id: `b${b}-3`, action: 'core.echo', dependsOn: [`b${b}-2`], inputFrom: { value: `b${b}-2.result.branch` } },
    );
  }
  steps.push({ id: 'sink', action: 'core.echo', dependsOn: Array.from({ length: 12 }, (_, b) => `b${b}-3`), inputFrom: Object.fromEntries(Array.from({ length: 12 }, (_, b) => [`v${b}`, `b${b}-3.result.value`])) });
  for (let i = 0; i < 12; i++) steps.push({ id: `after${i}`, action: 'core.echo', dependsOn: ['sink'], input: { i }, inputFrom: { got: `sink.result.v${i}` } });
  return { name: 'fan-out/fan-in', steps };
}

describe('cancelWorkflow while no orchestrator runs (nothing can end the workflow meanwhile)', () => {
  const db = useTestDatabase();
  it('answers a second request with already-requested, and stores it once', async () => {
    const store = createPostgresEventStore(db().pool);
    const deps = { store, runtime: createExecutionRuntime(store), actions: workflowActions };
    const { workflowId } = await submitWorkflow(deps, { steps: [{ id: 'a', action: 'core.noop' }] });
    expect(await cancelWorkflow(deps, workflowId, 'first')).toMatchObject({ outcome: 'cancel-requested', status: 'Cancelling' });
    expect(await cancelWorkflow(deps, workflowId, 'second')).toMatchObject({ outcome: 'already-requested', status: 'Cancelling' });
    const events = (await store.readStream(workflowStreamId(workflowId))).map((e) => e.type);
    expect(events.filter((t) => t === 'WorkflowCancelRequested')).toHaveLength(1);
  });
});

describe('workflows on a real executor and worker', () => {
  let c: WorkflowCluster;
  beforeAll(async () => {
    c = await startWorkflowCluster({ natsUrl, orchestrators: 2 });
  });
  afterAll(async () => {
    await c?.close();
  });
  const deps = () => ({ store: c.store, runtime: c.runtime, actions: workflowActions });

  /** Each step's executions (by the ExecutionRequested events that name the workflow). */
  async function executionsOf(workflowId: string) {
    const byStep = new Map<string, string[]>();
    for (const e of await allEvents(c.store, [EXECUTION_STREAM_PREFIX])) {
      const d = e.data as { workflowId?: string; idempotencyKey?: string };
      if (e.type !== 'ExecutionRequested' || d.workflowId !== workflowId) continue;
      const step = d.idempotencyKey!.slice(`workflow:${workflowId}:`.length);
      byStep.set(step, [...(byStep.get(step) ?? []), executionIdOfStream(e.streamId)!]);
    }
    return byStep;
  }

  it('runs a 50-step fan-out/fan-in DAG: each step once, after all its parents, with inputs mapped (two orchestrators racing)', async () => {
    const definition = fanOutFanIn();
    const { workflowId } = await submitWorkflow(deps(), definition);
    const ended = await workflowEnded(c.store, workflowId, 30_000);
    expect(ended.snapshot.value).toBe('Completed');

    // One execution per step, each recorded once, and none without a step.
    const byStep = await executionsOf(workflowId);
    expect(byStep.size).toBe(50);
    for (const [step, ids] of byStep) expect(ids, step).toHaveLength(1);
    const types = ended.events.map((e) => e.type);
    expect(types.filter((t) => t === 'WorkflowStepScheduled')).toHaveLength(50);
    expect(types.filter((t) => t === 'WorkflowStepFinished')).toHaveLength(50);
    expect(types.at(-1)).toBe('WorkflowCompleted');

    // Order by commit order (readAll's), never by comparing global positions numerically.
    const events = await allEvents(c.store, [EXECUTION_STREAM_PREFIX]);
    const at = new Map(events.map((e, i) => [e.eventId, i]));
    const when = (executionId: string, type: string) => {
      const e = events.find((x) => x.streamId === executionStreamId(executionId) && x.type === type);
      expect(e, `${executionId} has ${type}`).toBeDefined();
      return at.get(e!.eventId)!;
    };
    for (const step of definition.steps as { id: string; dependsOn?: string[] }[]) {
      const started = when(byStep.get(step.id)![0]!, 'ExecutionStarted');
      for (const parent of step.dependsOn ?? []) expect(when(byStep.get(parent)![0]!, 'ExecutionCompleted'), `${parent} completed before ${step.id} started`).toBeLessThan(started);
      expect(events.filter((e) => e.streamId === executionStreamId(byStep.get(step.id)![0]!) && e.type === 'ExecutionStarted')).toHaveLength(1);
    }

    // Inputs were mapped from parents' results, and parentId is the first parent's execution.
    const status = await workflowStatus(deps(), workflowId);
    const step = (id: string) => status.steps.find((s) => s.id === id)!;
    expect(step('b7-2').result).toEqual({ branch: 7, tag: 'from-root' });
    expect(step('b7-3').result).toEqual({ value: 7 });
    expect(step('sink').result).toEqual(Object.fromEntries(Array.from({ length: 12 }, (_, b) => [`v${b}`, b])));
    expect(step('after5').result).toEqual({ i: 5, got: 5 });
    const requested = await c.runtime.load(step('b7-2').executionId!);
    expect(requested.snapshot.context).toMatchObject({ workflowId, parentId: step('b7-1').executionId, input: { branch: 7, tag: 'from-root' } });
    expect((await c.runtime.load(step('root').executionId!)).snapshot.context.parentId).toBeUndefined();
    expect(status.steps.every((s) => s.status === 'Completed' && s.execution?.status === 'Completed' && s.execution.attempt === 1)).toBe(true);
  }, 40_000);

  it('fail-fast: a failing step stops the workflow; nothing more starts, waiting steps are cancelled, WorkflowFailed names the step', async () => {
    const { workflowId } = await submitWorkflow(deps(), {
      onFailure: 'fail-fast',
      steps: [
        { id: 'start', action: 'core.echo', input: { go: true } },
        // `bad` fails only after `slow` had time to start, so the cancel finds it running.
        { id: 'pause', action: 'core.sleep', dependsOn: ['start'], input: { ms: 500 } },
        { id: 'bad', action: 'core.fail', dependsOn: ['pause'], input: { message: 'boom', retryable: false } },
        { id: 'waiting', action: 'test.unserved', dependsOn: ['start'] },
        { id: 'slow', action: 'core.sleep', dependsOn: ['start'], input: { ms: 1_500 } },
        { id: 'after-bad', action: 'core.echo', dependsOn: ['bad'] },
        { id: 'after-waiting', action: 'core.echo', dependsOn: ['waiting'] },
      ],
    });
    const ended = await workflowEnded(c.store, workflowId);
    expect(ended.snapshot.value).toBe('Failed');
    expect(ended.events.at(-1)).toMatchObject({ type: 'WorkflowFailed', data: { failedSteps: ['bad'], reason: expect.stringMatching(/bad \(Failed: boom\).*cancelled: waiting, slow$/) } });
    const status = await workflowStatus(deps(), workflowId);
    const byId = Object.fromEntries(status.steps.map((s) => [s.id, s]));
    expect(byId['start']!.status).toBe('Completed');
    expect(byId['bad']).toMatchObject({ status: 'Failed', error: { message: 'boom' }, execution: { status: 'Failed' } });
    expect(byId['waiting']).toMatchObject({ status: 'Cancelled', execution: { status: 'Cancelled' } });
    // `slow` was running: its worker was asked to stop, aborted the run and recorded it.
    expect((await c.store.readStream(executionStreamId(byId['slow']!.executionId!))).map((e) => e.type)).toContain('ExecutionCancelRequested');
    expect(byId['slow']).toMatchObject({ status: 'Cancelled', execution: { status: 'Cancelled' } });
    expect(byId['after-bad']).toMatchObject({ status: 'Skipped', executionId: null });
    expect(byId['after-waiting']).toMatchObject({ status: 'Skipped', executionId: null });
    expect([...(await executionsOf(workflowId)).keys()].sort()).toEqual(['bad', 'pause', 'slow', 'start', 'waiting']);
  });

  it('continue: independent branches complete; only what depends on the failure is skipped', async () => {
    const { workflowId } = await submitWorkflow(deps(), {
      onFailure: 'continue',
      steps: [
        { id: 'root', action: 'core.noop' },
        { id: 'a1', action: 'core.fail', dependsOn: ['root'], input: { message: 'a1 broke', retryable: false } },
        { id: 'a2', action: 'core.noop', dependsOn: ['a1'] },
        { id: 'b1', action: 'core.sleep', dependsOn: ['root'], input: { ms: 200 } },
        { id: 'b2', action: 'core.noop', dependsOn: ['b1'] },
        { id: 'c1', action: 'core.noop', dependsOn: ['root'] },
        { id: 'join', action: 'core.noop', dependsOn: ['a2', 'b2'] },
      ],
    });
    const ended = await workflowEnded(c.store, workflowId);
    expect(ended.events.at(-1)).toMatchObject({ type: 'WorkflowFailed', data: { failedSteps: ['a1'] } });
    const status = await workflowStatus(deps(), workflowId);
    expect(Object.fromEntries(status.steps.map((s) => [s.id, s.status]))).toEqual({
      root: 'Completed', a1: 'Failed', a2: 'Skipped', b1: 'Completed', b2: 'Completed', c1: 'Completed', join: 'Skipped',
    });
  });

  it('a step whose inputFrom names a path its parent’s result lacks does not run: its execution ends Abandoned naming the path, and the workflow fails naming the step', async () => {
    const { workflowId } = await submitWorkflow(deps(), {
      onFailure: 'continue',
      steps: [
        { id: 'p', action: 'core.echo', input: { out: { url: 's3://x' }, none: null } },
        { id: 'holey', action: 'core.echo', dependsOn: ['p'], input: { keep: 1 }, inputFrom: { url: 'p.result.out.url', gone: 'p.result.out.nope' } },
        // An explicit null in the result is there, and is passed on.
        { id: 'nulls', action: 'core.echo', dependsOn: ['p'], inputFrom: { none: 'p.result.none' } },
      ],
    });
    const ended = await workflowEnded(c.store, workflowId);
    const reason = `not run: its input could not be made from its parents' results: inputFrom.gone: "p.result.out.nope" is not in the result (it holds p.result.out, but not the rest)`;
    expect(ended.events.at(-1)).toMatchObject({ type: 'WorkflowFailed', data: { failedSteps: ['holey'], reason: `step holey (Abandoned: ${reason}) did not complete` } });
    const status = await workflowStatus(deps(), workflowId);
    const byId = Object.fromEntries(status.steps.map((s) => [s.id, s]));
    expect(byId['nulls']).toMatchObject({ status: 'Completed', result: { none: null } });
    expect(byId['holey']).toMatchObject({ status: 'Abandoned', error: { message: reason }, execution: { status: 'Abandoned' } });
    // Recorded, ended in the append that created it: no handoff, no start, its input without the hole.
    const history = await c.store.readStream(executionStreamId(byId['holey']!.executionId!));
    expect(history.map((e) => [e.type, e.revision])).toEqual([['ExecutionRequested', 0n], ['ExecutionAbandoned', 1n]]);
    expect(history[0]!.data).toMatchObject({ input: { keep: 1, url: 's3://x' } });
    expect(history[1]!.data).toEqual({ reason });
    // A repeat of the step's submission (an orchestrator's retry) finds that execution.
    const again = await c.runtime.submitAbandoned({ action: 'core.echo', input: { keep: 1, url: 's3://x' }, idempotencyKey: stepExecutionKey(workflowId, 'holey'), workflowId, correlationId: workflowId, parentId: byId['p']!.executionId! }, reason);
    expect(again).toMatchObject({ executionId: byId['holey']!.executionId, created: false });
  });

  it('cancelWorkflow mid-run: unfinished steps end Cancelled, nothing more starts, the workflow ends Cancelled', async () => {
    const { workflowId } = await submitWorkflow(deps(), {
      steps: [
        { id: 'slow', action: 'core.sleep', input: { ms: 1_500 } },
        { id: 'waiting', action: 'test.unserved' },
        { id: 'later', action: 'core.noop', dependsOn: ['slow'] },
      ],
    });
    // Once `slow` runs on the worker and `waiting` waits for one that never comes.
    await eventually('slow to run', async () => {
      const s = await workflowStatus(deps(), workflowId);
      const slow = s.steps.find((x) => x.id === 'slow')!;
      const waiting = s.steps.find((x) => x.id === 'waiting')!;
      return slow.execution?.status === 'Running' && waiting.execution?.status === 'Requested' ? s : undefined;
    });
    const r = await cancelWorkflow(deps(), workflowId, 'changed my mind');
    expect(r).toMatchObject({ outcome: 'cancel-requested', status: 'Cancelling' });
    // Asked again: still cancelling, or, if the orchestrator already ended it (the worker stopped
    // `slow` at once; CI saw this once), too late. Never a second request.
    const again = await cancelWorkflow(deps(), workflowId, 'again');
    expect([
      { outcome: 'already-requested', status: 'Cancelling' },
      { outcome: 'too-late', status: 'Cancelled' },
    ]).toContainEqual({ outcome: again.outcome, status: again.status });
    const ended = await workflowEnded(c.store, workflowId);
    expect(ended.snapshot.value).toBe('Cancelled');
    expect(ended.events.at(-1)).toMatchObject({ type: 'WorkflowCancelled', data: { reason: 'changed my mind' } });
    const status = await workflowStatus(deps(), workflowId);
    const byId = Object.fromEntries(status.steps.map((s) => [s.id, s]));
    expect(byId['waiting']).toMatchObject({ status: 'Cancelled', execution: { status: 'Cancelled' } });
    // `slow` was running on the worker: its worker was asked to stop, aborted the run and recorded it.
    const slowEvents = await c.store.readStream(executionStreamId(byId['slow']!.executionId!));
    expect(slowEvents.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCancelRequested', 'ExecutionCancelled']);
    expect(slowEvents.at(-1)!.metadata.by).toMatch(/^worker:/);
    expect(byId['slow']).toMatchObject({ status: 'Cancelled', execution: { status: 'Cancelled' } });
    expect(byId['later']).toMatchObject({ status: 'Skipped', executionId: null });
    // Stopped by the workflow's cancel, not failed: no step is listed as failed.
    expect(status.failedSteps).toEqual([]);
    expect(await cancelWorkflow(deps(), workflowId, 'too late')).toMatchObject({ outcome: 'too-late', status: 'Cancelled', message: expect.stringMatching(/already Cancelled/) });
  });
});

describe('a crash between submitting a step and recording it', () => {
  const db = useTestDatabase();

  it('leaves one execution, which the next orchestrator finds and records', async () => {
    const store = createPostgresEventStore(db().pool);
    const runtime = createExecutionRuntime(store);
    const deps = { store, runtime, actions: workflowActions };
    const { workflowId } = await submitWorkflow(deps, { steps: [{ id: 'only', action: 'test.unserved', input: { n: 1 }, maxAttempts: 2 }] });
    // The crashed orchestrator's submit: the same request it would make, then no WorkflowStepScheduled.
    const orphan = await runtime.submit({ action: 'test.unserved', input: { n: 1 }, maxAttempts: 2, idempotencyKey: stepExecutionKey(workflowId, 'only'), workflowId });
    const orchestrator = startOrchestrator({ store, log: silentLogger(), sweepEveryMs: 0 });
    try {
      await orchestrator.ready;
      const w = await eventually('the step to be recorded', async () => {
        const l = await loadWorkflow(store, workflowId);
        return l.snapshot.context.steps['only']!.status === 'scheduled' ? l : undefined;
      });
      expect(w.snapshot.context.steps['only']!.executionId).toBe(orphan.executionId);
      const requested = (await allEvents(store, [EXECUTION_STREAM_PREFIX])).filter((e) => e.type === 'ExecutionRequested');
      expect(requested).toHaveLength(1);
      expect(statusOf((await runtime.load(orphan.executionId)).snapshot)).toBe('Requested');
      // And cancelling reaches it even though it never left Requested.
      await cancelWorkflow(deps, workflowId, 'stop');
      expect((await workflowEnded(store, workflowId)).snapshot.value).toBe('Cancelled');
      expect((await allEvents(store, [WORKFLOW_STREAM_PREFIX])).map((e) => e.type)).toEqual(['WorkflowStarted', 'WorkflowStepScheduled', 'WorkflowCancelRequested', 'WorkflowStepFinished', 'WorkflowCancelled']);
    } finally {
      await orchestrator.stop();
      await store.close();
    }
  });
});

describe('scheduling a step records it before its execution exists', () => {
  const db = useTestDatabase();
  const setup = async () => {
    const store = createPostgresEventStore(db().pool);
    const runtime = createExecutionRuntime(store);
    const deps = { store, runtime, actions: workflowActions };
    const { workflowId } = await submitWorkflow(deps, { steps: [{ id: 'only', action: 'test.unserved', input: { n: 1 } }] });
    const workflows = createWorkflowRuntime(store);
    const round = (o: Partial<RoundDeps> = {}): RoundDeps => ({ workflows, executions: runtime, log: silentLogger(), parallelism: 4, outcomeKnown: () => undefined, onRecorded: () => undefined, onConflict: () => undefined, ...o });
    const followed = { id: workflowId, executions: new Map<string, string>(), errors: new Map<string, string>(), cancelAsked: new Set<string>() };
    const stepExecution = executionIdForKey(stepExecutionKey(workflowId, 'only'));
    const workflowEvents = async () => (await store.readStream(workflowStreamId(workflowId))).map((e) => e.type);
    return { store, runtime, deps, workflowId, workflows, round, followed, stepExecution, workflowEvents };
  };

  it('a cancel that lands between the plan and its record leaves no execution of the step (QA: it was submitted first, handed off and ran)', async () => {
    const { store, runtime, deps, workflowId, workflows, round, followed, stepExecution, workflowEvents } = await setup();
    try {
      const cancelFirst = { ...workflows, dispatch: (async (...args: Parameters<typeof workflows.dispatch>) => {
        await cancelWorkflow(deps, workflowId, 'meanwhile');
        return workflows.dispatch(...args);
      }) as typeof workflows.dispatch };
      expect(await advance(round({ workflows: cancelFirst }), followed)).toBe(true);
      await expect(runtime.load(stepExecution)).rejects.toBeInstanceOf(NotFoundError);
      expect(await workflowEvents()).toEqual(['WorkflowStarted', 'WorkflowCancelRequested']);
      // The next round ends it Cancelled, the step never scheduled.
      while ((await advance(round(), followed)) !== 'ended');
      expect(await workflowEvents()).toEqual(['WorkflowStarted', 'WorkflowCancelRequested', 'WorkflowCancelled']);
      await expect(runtime.load(stepExecution)).rejects.toBeInstanceOf(NotFoundError);
    } finally {
      await store.close();
    }
  });

  it('a step recorded whose submit did not happen (the round stopped in between) gets its execution from the next round, once', async () => {
    const { store, runtime, round, followed, stepExecution, workflowEvents } = await setup();
    try {
      const crashing = { ...runtime, submit: async () => Promise.reject(new Error('the process died here')) } as typeof runtime;
      await expect(advance(round({ executions: crashing }), followed)).rejects.toThrow('the process died here');
      expect(await workflowEvents()).toEqual(['WorkflowStarted', 'WorkflowStepScheduled']);
      await expect(runtime.load(stepExecution)).rejects.toBeInstanceOf(NotFoundError);
      await advance(round(), followed);
      expect(statusOf((await runtime.load(stepExecution)).snapshot)).toBe('Requested');
      await advance(round(), followed);
      const requested = (await allEvents(store, [EXECUTION_STREAM_PREFIX])).filter((e) => e.type === 'ExecutionRequested');
      expect(requested).toHaveLength(1);
    } finally {
      await store.close();
    }
  });
});
