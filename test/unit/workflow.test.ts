// Workflows, pure: definitions are checked before anything is written (cycles with their path),
// and the workflow machine with its plan runs a DAG to completion, fail-fast or continue, and
// cancels, in any order the steps happen to finish.
import { describe, expect, it } from 'vitest';
import { decideWorkflow, failedSteps, foldWorkflow, startWorkflow, workflowPlan, type WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import { WorkflowEvent, type StepOutcome } from '../../schemas/workflow-events.ts';
import { checkWorkflow, stepInput, type WorkflowDefinition } from '../../schemas/workflow.ts';
import { seededRandom } from '../support/random-histories.ts';

const meta = { by: 'executor' as const, occurredAt: '2026-11-21T00:00:00.000Z' };
const ev = (type: string, data: unknown) => WorkflowEvent.parse({ type, data, metadata: meta });
const def = (steps: { id: string; dependsOn?: string[] }[], onFailure: 'fail-fast' | 'continue' = 'fail-fast') => {
  const r = checkWorkflow({ onFailure, steps: steps.map((s) => ({ action: 'core.echo', ...s })) });
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.definition;
};

describe('checkWorkflow', () => {
  const problems = (value: unknown, actions?: Set<string>) => {
    const r = checkWorkflow(value, actions);
    return r.ok ? [] : r.problems;
  };

  it('reports a cycle with its path, in the order the steps would run', () => {
    const steps = [
      { id: 'a', action: 'x', dependsOn: ['c'] },
      { id: 'b', action: 'x', dependsOn: ['a'] },
      { id: 'c', action: 'x', dependsOn: ['b'] },
      { id: 'd', action: 'x' },
    ];
    expect(problems({ steps })).toEqual([{ path: 'steps', message: 'dependency cycle: a → b → c → a' }]);
  });

  it('names every other problem by field: self-reference, a parent named twice, missing step, unknown action, duplicate id, a result from a non-parent', () => {
    const steps = [
      { id: 'a', action: 'core.echo', dependsOn: ['a'] },
      { id: 'b', action: 'nope.action', dependsOn: ['zzz'] },
      { id: 'b', action: 'core.echo' },
      { id: 'c', action: 'core.echo', inputFrom: { url: 'a.result.url' } },
      { id: 'd', action: 'core.echo', dependsOn: ['c', 'a', 'c'] },
    ];
    expect(problems({ steps }, new Set(['core.echo']))).toEqual([
      { path: 'steps.2.id', message: '"b" is already the id of steps.1' },
      { path: 'steps.0.dependsOn.0', message: 'step "a" depends on itself' },
      { path: 'steps.1.action', message: 'unknown action "nope.action"' },
      { path: 'steps.1.dependsOn.0', message: 'no step "zzz" in this workflow' },
      { path: 'steps.3.inputFrom.url', message: '"a.result.url" names "a", which is not in dependsOn' },
      { path: 'steps.4.dependsOn.2', message: '"c" is already dependsOn.0' },
    ]);
  });

  it('refuses malformed fields by path, and accepts a good definition with defaults', () => {
    expect(problems({ steps: [] })[0]).toMatchObject({ path: 'steps', message: expect.stringMatching(/at least one step/) });
    expect(problems({ steps: [{ id: 'bad id', action: 'x' }] })[0]).toMatchObject({ path: 'steps.0.id' });
    const ok = checkWorkflow({ steps: [{ id: 'a', action: 'x' }] });
    expect(ok).toMatchObject({ ok: true, definition: { onFailure: 'fail-fast', steps: [{ id: 'a', dependsOn: [] }] } });
  });

  it('maps parents’ results into a step’s input', () => {
    const d = checkWorkflow({ steps: [{ id: 'p', action: 'x' }, { id: 'c', action: 'x', dependsOn: ['p'], input: { size: 3 }, inputFrom: { url: 'p.result.out.url', all: 'p.result' } }] });
    if (!d.ok) throw new Error('invalid');
    const results = new Map([['p', { out: { url: 's3://x' } }]]);
    expect(stepInput(d.definition.steps[1]!, results)).toEqual({ input: { size: 3, url: 's3://x', all: { out: { url: 's3://x' } } }, missing: [] });
  });

  it('refuses a key given both in input and in inputFrom, which would silently replace one with the other', () => {
    expect(problems({ steps: [{ id: 'p', action: 'x' }, { id: 'c', action: 'x', dependsOn: ['p'], input: { x: 1, y: 2 }, inputFrom: { x: 'p.result.x' } }] })).toEqual([
      { path: 'steps.1.inputFrom.x', message: '"x" is given in input too; a key is filled from one place' },
    ]);
  });

  it('names each inputFrom path a parent’s result does not hold, and leaves its key out; an explicit null is passed on', () => {
    const d = checkWorkflow({
      steps: [
        { id: 'p', action: 'x' },
        { id: 'c', action: 'x', dependsOn: ['p'], input: { size: 3 }, inputFrom: { url: 'p.result.out.url', gone: 'p.result.out.nope.deeper', none: 'p.result.none', n: 'p.result.items.1', str: 'p.result.out.url.length', len: 'p.result.items.length', past: 'p.result.items.2' } },
      ],
    });
    if (!d.ok) throw new Error('invalid');
    const results = new Map([['p', { out: { url: 's3://x' }, none: null, items: ['a', 'b'] }]]);
    expect(stepInput(d.definition.steps[1]!, results)).toEqual({
      input: { size: 3, url: 's3://x', none: null, n: 'b' },
      missing: [
        { key: 'gone', ref: 'p.result.out.nope.deeper', found: 'p.result.out' },
        { key: 'str', ref: 'p.result.out.url.length', found: 'p.result.out.url' },
        // A list's items are its fields: not its length, nor an index past its end.
        { key: 'len', ref: 'p.result.items.length', found: 'p.result.items' },
        { key: 'past', ref: 'p.result.items.2', found: 'p.result.items' },
      ],
    });
  });
});

/** Play the orchestrator: follow the plan, finishing running steps in a random order. */
function orchestrate(definition: WorkflowDefinition, outcome: (stepId: string) => StepOutcome, seed: number, o: { cancelAfter?: number } = {}) {
  const random = seededRandom(seed);
  const events: WorkflowEvent[] = [ev('WorkflowStarted', { definition })];
  let snapshot: WorkflowSnapshot = startWorkflow(events[0]!);
  const apply = (e: WorkflowEvent) => {
    const d = decideWorkflow(snapshot, e);
    if (!d.ok) throw new Error(d.reason);
    snapshot = d.snapshot;
    events.push(e);
  };
  const order: string[] = [];
  const running = new Map<string, string>();
  for (let round = 0; snapshot.status !== 'done' && round < 10_000; round++) {
    if (o.cancelAfter !== undefined && order.length === o.cancelAfter && snapshot.value === 'Running') apply(ev('WorkflowCancelRequested', { reason: 'user asked' }));
    const plan = workflowPlan(snapshot);
    for (const step of plan.schedule) {
      const executionId = `x-${step.id}`;
      apply(ev('WorkflowStepScheduled', { stepId: step.id, executionId }));
      running.set(step.id, executionId);
    }
    if (plan.cancel.length > 0) {
      // The orchestrator cancels these executions; each ends Cancelled, then it plans again.
      for (const c of plan.cancel) {
        apply(ev('WorkflowStepFinished', { stepId: c.stepId, executionId: c.executionId, outcome: 'Cancelled' }));
        running.delete(c.stepId);
      }
      continue;
    }
    if (plan.end) {
      apply(ev(plan.end, plan.end === 'WorkflowFailed' ? { reason: 'a step failed', failedSteps: failedSteps(snapshot) } : plan.end === 'WorkflowCancelled' ? { reason: 'user asked' } : {}));
      break;
    }
    const ids = [...running.keys()];
    if (ids.length === 0) throw new Error(`stuck: nothing running and no end (plan ${JSON.stringify(plan)})`);
    const stepId = ids[Math.floor(random() * ids.length)]!;
    const result = outcome(stepId);
    apply(ev('WorkflowStepFinished', { stepId, executionId: running.get(stepId), outcome: result, ...(result === 'Completed' && { result: { from: stepId } }) }));
    running.delete(stepId);
    order.push(stepId);
  }
  return { snapshot, events, order };
}

/** 50 steps: a root fans out to 12 branches of 3 steps, which fan in to one sink, then 12 more. */
function fanOutFanIn(onFailure: 'fail-fast' | 'continue' = 'fail-fast') {
  const steps: { id: string; dependsOn?: string[] }[] = [{ id: 'root' }];
  for (let b = 0; b < 12; b++) {
    steps.push({ id: `b${b}-1`, dependsOn: ['root'] }, { id: `b${b}-2`, dependsOn: [`b${b}-1`] }, { id: `b${b}-3`, dependsOn: [`b${b}-2`] });
  }
  steps.push({ id: 'sink', dependsOn: Array.from({ length: 12 }, (_, b) => `b${b}-3`) });
  for (let i = 0; i < 12; i++) steps.push({ id: `after${i}`, dependsOn: ['sink'] });
  expect(steps).toHaveLength(50);
  return def(steps, onFailure);
}

describe('the workflow machine and its plan', () => {
  it('runs a 50-step fan-out/fan-in DAG to completion, each step only after all its parents', () => {
    const definition = fanOutFanIn();
    for (const seed of [1, 2, 3]) {
      const { snapshot, events } = orchestrate(definition, () => 'Completed', seed);
      expect(snapshot.value).toBe('Completed');
      const finished = new Set<string>();
      for (const e of events) {
        if (e.type === 'WorkflowStepScheduled') {
          const step = definition.steps.find((s) => s.id === e.data.stepId)!;
          expect(step.dependsOn.filter((p) => !finished.has(p)), `${step.id} scheduled before its parents`).toEqual([]);
        }
        if (e.type === 'WorkflowStepFinished') finished.add(e.data.stepId);
      }
      expect(finished.size).toBe(50);
      expect(foldWorkflow(events).value).toBe('Completed'); // a successor executor reads the same
    }
  });

  it('fail-fast: the first failure cancels what runs, starts nothing more, and fails the workflow', () => {
    const { snapshot, events } = orchestrate(fanOutFanIn('fail-fast'), (id) => (id === 'b3-1' ? 'Failed' : 'Completed'), 5);
    expect(snapshot.value).toBe('Failed');
    const afterFailure = events.slice(events.findIndex((e) => e.type === 'WorkflowStepFinished' && e.data.outcome === 'Failed'));
    expect(afterFailure.some((e) => e.type === 'WorkflowStepScheduled')).toBe(false);
    expect(events.some((e) => e.type === 'WorkflowStepScheduled' && e.data.stepId === 'sink')).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'WorkflowFailed', data: { failedSteps: expect.arrayContaining(['b3-1']) } });
  });

  it('continue: independent branches finish; only what depends on the failure is skipped', () => {
    const { snapshot, events } = orchestrate(fanOutFanIn('continue'), (id) => (id === 'b3-2' ? 'Failed' : 'Completed'), 9);
    expect(snapshot.value).toBe('Failed');
    const done = new Set(events.flatMap((e) => (e.type === 'WorkflowStepFinished' && e.data.outcome === 'Completed' ? [e.data.stepId] : [])));
    for (let b = 0; b < 12; b++) if (b !== 3) expect(done.has(`b${b}-3`)).toBe(true);
    expect(done.has('b3-3') || done.has('sink')).toBe(false);
  });

  it('cancel: running steps are cancelled and the workflow ends Cancelled once none is in flight', () => {
    const { snapshot, events } = orchestrate(fanOutFanIn(), () => 'Completed', 4, { cancelAfter: 3 });
    expect(snapshot.value).toBe('Cancelled');
    const cancelAt = events.findIndex((e) => e.type === 'WorkflowCancelRequested');
    expect(events.slice(cancelAt).some((e) => e.type === 'WorkflowStepScheduled')).toBe(false);
    expect(events.slice(cancelAt).filter((e) => e.type === 'WorkflowStepFinished').every((e) => e.type === 'WorkflowStepFinished' && e.data.outcome === 'Cancelled')).toBe(true);
  });

  it('cancel after every step completed (the last finished before the cancel reached it): the workflow ends Completed, not Cancelled (QA)', () => {
    const d = def([{ id: 'a' }, { id: 'b', dependsOn: ['a'] }]);
    const step = (s: WorkflowSnapshot, e: WorkflowEvent) => {
      const r = decideWorkflow(s, e);
      if (!r.ok) throw new Error(r.reason);
      return r.snapshot;
    };
    let s = startWorkflow(ev('WorkflowStarted', { definition: d }));
    s = step(s, ev('WorkflowStepScheduled', { stepId: 'a', executionId: 'x' }));
    s = step(s, ev('WorkflowStepFinished', { stepId: 'a', executionId: 'x', outcome: 'Completed' }));
    s = step(s, ev('WorkflowStepScheduled', { stepId: 'b', executionId: 'y' }));
    s = step(s, ev('WorkflowCancelRequested', { reason: 'user asked' }));
    expect(workflowPlan(s)).toMatchObject({ cancel: [{ stepId: 'b', executionId: 'y' }] });
    expect(workflowPlan(s).end).toBeUndefined();
    s = step(s, ev('WorkflowStepFinished', { stepId: 'b', executionId: 'y', outcome: 'Completed' }));
    expect(workflowPlan(s).end).toBe('WorkflowCompleted');
    expect(step(s, ev('WorkflowCompleted', {})).value).toBe('Completed');
    // A step that did not complete (cancelled, or never started) still ends it Cancelled.
    let t = startWorkflow(ev('WorkflowStarted', { definition: d }));
    t = step(t, ev('WorkflowStepScheduled', { stepId: 'a', executionId: 'x' }));
    t = step(t, ev('WorkflowCancelRequested', { reason: 'user asked' }));
    t = step(t, ev('WorkflowStepFinished', { stepId: 'a', executionId: 'x', outcome: 'Completed' }));
    expect(workflowPlan(t).end).toBe('WorkflowCancelled');
    expect(decideWorkflow(t, ev('WorkflowCompleted', {})).ok).toBe(false);
  });

  it('refuses out-of-order orchestration: a step before its parent, twice, or finished without being scheduled', () => {
    const d = def([{ id: 'a' }, { id: 'b', dependsOn: ['a'] }]);
    let s = startWorkflow(ev('WorkflowStarted', { definition: d }));
    expect(decideWorkflow(s, ev('WorkflowStepScheduled', { stepId: 'b', executionId: 'x' }))).toMatchObject({ ok: false, reason: expect.stringMatching(/step b is pending/) });
    expect(decideWorkflow(s, ev('WorkflowStepFinished', { stepId: 'a', executionId: 'x', outcome: 'Completed' })).ok).toBe(false);
    s = (decideWorkflow(s, ev('WorkflowStepScheduled', { stepId: 'a', executionId: 'x' })) as { snapshot: WorkflowSnapshot }).snapshot;
    expect(decideWorkflow(s, ev('WorkflowStepScheduled', { stepId: 'a', executionId: 'y' })).ok).toBe(false);
    expect(decideWorkflow(s, ev('WorkflowStepFinished', { stepId: 'a', executionId: 'other', outcome: 'Completed' })).ok).toBe(false);
    expect(decideWorkflow(s, ev('WorkflowCompleted', {})).ok).toBe(false);
  });
});
