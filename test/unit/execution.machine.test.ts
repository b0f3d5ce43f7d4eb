import { describe, it, expect } from 'vitest';
import { transition } from 'xstate';
import { ExecutionEvent } from '../../schemas/events.ts';
import {
  MACHINE_VERSION,
  allowedEventTypes,
  decideExecution,
  executionMachine,
  executionStatuses,
  foldExecution,
  isFinal,
  startExecution,
  statusOf,
  type ExecutionSnapshot,
  type ExecutionStatus,
  type Rejection,
  finalStatuses,
} from '../../actors/execution.machine.ts';
import { at, ev, withBy } from '../support/execution-paths.ts';

// Histories that reach each live state with worker a, attempt 1.
const requested = () => [ev.requested()];
const scheduling = () => [...requested(), ev.schedulingStarted()];
const scheduled = () => [...scheduling(), ev.handedOff('a', 1)];
const running = () => [...scheduled(), ev.started('a', 1)];
/** Back in Requested with a retry pending, after a retryable failure of attempt 1. */
const retryPending = () => [...running(), ev.failed('a', true)];

function accept(snapshot: ExecutionSnapshot, event: ExecutionEvent): ExecutionSnapshot {
  const decision = decideExecution(snapshot, event);
  if (!decision.ok) throw new Error(`expected ${event.type} to be accepted: ${decision.rejection}: ${decision.reason}`);
  return decision.snapshot;
}

/**
 * Asserts the refusal and its class, and that nothing moved: neither through the decision
 * nor through the machine itself (the guards refuse, not only the classifier).
 */
function expectRefused(
  snapshot: ExecutionSnapshot,
  event: ExecutionEvent,
  rejection: Rejection,
  reason?: string | RegExp,
) {
  const before = structuredClone({ value: snapshot.value, context: snapshot.context });
  const decision = decideExecution(snapshot, event);
  expect(decision.ok).toBe(false);
  if (decision.ok) return;
  expect(decision.rejection).toBe(rejection);
  if (reason !== undefined) expect(decision.reason).toMatch(reason);
  expect({ value: snapshot.value, context: snapshot.context }).toEqual(before);
  const [next] = transition(executionMachine, snapshot, event);
  expect(next.value).toBe(snapshot.value);
  expect(next.context).toBe(snapshot.context);
}

const after = (events: ExecutionEvent[], status: ExecutionStatus) => {
  const snapshot = foldExecution(events);
  expect(statusOf(snapshot)).toBe(status);
  return snapshot;
};

describe('event builders', () => {
  it('validate what they build against the catalog', () => {
    expect(() => ev.handedOff('a', 0)).toThrow();
    expect(() => ev.requested({ maxAttempts: 0 })).toThrow();
    expect(() => ev.cancelled('executor', '')).toThrow();
  });
});

describe('start', () => {
  it('builds the context from ExecutionRequested', () => {
    const s = startExecution(
      ev.requested({ maxAttempts: 3, idempotencyKey: 'k1', priority: 5, parentId: 'p', workflowId: 'w' }),
    );
    expect(statusOf(s)).toBe('Requested');
    expect(isFinal(s)).toBe(false);
    expect(s.context).toEqual({
      action: 'http.get',
      input: { url: 'https://example.test/' },
      owner: 'executor',
      workerId: null,
      attempt: 1,
      maxAttempts: 3,
      submittedMaxAttempts: 3,
      idempotencyKey: 'k1',
      priority: 5,
      parentId: 'p',
      workflowId: 'w',
      namespace: 'default',
      result: undefined,
      error: undefined,
      retryPending: false,
      deadline: null,
      requestedAt: at(0),
      updatedAt: at(0),
      owners: ['executor'],
    });
  });

  it('keeps the namespace the request recorded; one recorded before namespaces is `default`', () => {
    expect(startExecution(ev.requested({ maxAttempts: 3, namespace: 'team-a' })).context.namespace).toBe('team-a');
    expect(startExecution(ev.requested({ maxAttempts: 3 })).context.namespace).toBe('default');
  });

  it('leaves absent optional request fields out of the context', () => {
    const s = startExecution(ev.requested());
    expect(Object.keys(s.context)).not.toContain('idempotencyKey');
    expect(Object.keys(s.context)).not.toContain('priority');
  });

  it('refuses to start from anything but ExecutionRequested', () => {
    expect(() => startExecution(ev.schedulingStarted())).toThrow(/starts with ExecutionRequested, not SchedulingStarted/);
  });

  it('has exactly the nine lifecycle states', () => {
    expect([...executionStatuses]).toEqual([
      'Requested',
      'Scheduling',
      'Scheduled',
      'Running',
      'Completed',
      'Failed',
      'Cancelled',
      'TimedOut',
      'Abandoned',
    ]);
  });

  it('exports the machine version appenders record', () => {
    expect(MACHINE_VERSION).toBe('7');
    expect([...finalStatuses].sort()).toEqual(['Abandoned', 'Cancelled', 'Completed', 'Failed', 'TimedOut']);
  });
});

describe('legal transitions', () => {
  it('Requested → Scheduling on SchedulingStarted', () => {
    const s = accept(foldExecution(requested()), ev.schedulingStarted({ at: at(1) }));
    expect(statusOf(s)).toBe('Scheduling');
    expect(s.context.owner).toBe('executor');
    expect(s.context.updatedAt).toBe(at(1));
  });

  it('Requested → Scheduling records the attempt limit the executor resolved: it replaces a default, and may only lower a submission\'s own', () => {
    const defaulted = foldExecution([ev.requested({ maxAttempts: 3, maxAttemptsIsDefault: true })]);
    expect(defaulted.context.submittedMaxAttempts).toBeUndefined();
    expect(accept(defaulted, ev.schedulingStarted({ maxAttempts: 5 })).context.maxAttempts).toBe(5);
    expect(accept(defaulted, ev.schedulingStarted()).context.maxAttempts).toBe(3); // none recorded: unchanged

    const own = foldExecution([ev.requested({ maxAttempts: 2 })]);
    expect(own.context.submittedMaxAttempts).toBe(2);
    expect(accept(own, ev.schedulingStarted({ maxAttempts: 1 })).context).toMatchObject({ maxAttempts: 1, submittedMaxAttempts: 2 });
    expectRefused(own, ev.schedulingStarted({ maxAttempts: 5 }), 'InvalidTransition', /maxAttempts 5 exceeds the submission's own limit 2/);
  });

  it('a recorded limit decides whether a retryable failure is retried, and may not fall below the current attempt', () => {
    const limited = [ev.requested({ maxAttempts: 3, maxAttemptsIsDefault: true }), ev.schedulingStarted({ maxAttempts: 1 }), ...running().slice(2)];
    expect(statusOf(accept(foldExecution(limited), ev.failed('a', true)))).toBe('Failed');
    const raised = [ev.requested({ maxAttempts: 1, maxAttemptsIsDefault: true }), ev.schedulingStarted({ maxAttempts: 2 }), ...running().slice(2)];
    const retrying = accept(foldExecution(raised), ev.failed('a', true));
    expect(statusOf(retrying)).toBe('Requested');
    const second = accept(retrying, ev.retryScheduled(2));
    expectRefused(second, ev.schedulingStarted({ maxAttempts: 1 }), 'InvalidTransition', /maxAttempts 1 is below the current attempt 2/);
    expect(accept(second, ev.schedulingStarted({ maxAttempts: 2 })).context.maxAttempts).toBe(2);
  });

  it('Requested → Scheduled on the executor’s ExecutionHandedOff (version 7), which records the attempt limit as SchedulingStarted did', () => {
    const s = accept(foldExecution(requested()), ev.handedOff('a', 1, { at: at(2), maxAttempts: 1 }));
    expect(statusOf(s)).toBe('Scheduled');
    expect(s.context).toMatchObject({ owner: 'worker:a', workerId: 'a', maxAttempts: 1, scheduledAt: at(2), owners: ['executor', 'worker:a'] });
    expect(accept(foldExecution(requested()), ev.handedOff('a', 1)).context.maxAttempts).toBe(2); // none recorded: unchanged

    const defaulted = foldExecution([ev.requested({ maxAttempts: 3, maxAttemptsIsDefault: true })]);
    expect(accept(defaulted, ev.handedOff('a', 1, { maxAttempts: 5 })).context.maxAttempts).toBe(5);
    const own = foldExecution([ev.requested({ maxAttempts: 2 })]);
    expectRefused(own, ev.handedOff('a', 1, { maxAttempts: 5 }), 'InvalidTransition', /ExecutionHandedOff maxAttempts 5 exceeds the submission's own limit 2/);
    expectRefused(foldExecution(retryPending()), ev.handedOff('a', 1), 'InvalidTransition', /retry decision is pending/);
    expectRefused(foldExecution(requested()), withBy(ev.handedOff('a', 1), 'worker:a'), 'NotOwner', /worker:a is not the owner/);
    const second = accept(foldExecution([...retryPending()]), ev.retryScheduled(2));
    expectRefused(second, ev.handedOff('a', 2, { maxAttempts: 1 }), 'InvalidTransition', /ExecutionHandedOff maxAttempts 1 is below the current attempt 2/);
    expect(accept(second, ev.handedOff('a', 2, { maxAttempts: 2 })).context).toMatchObject({ attempt: 2, maxAttempts: 2 });
  });

  it('Requested → Cancelled on the executor’s ExecutionCancelled', () => {
    const s = accept(foldExecution(requested()), ev.cancelled('executor', 'changed my mind', { at: at(9) }));
    expect(statusOf(s)).toBe('Cancelled');
    expect(isFinal(s)).toBe(true);
    expect(s.context).toMatchObject({ cancelReason: 'changed my mind', finishedAt: at(9), updatedAt: at(9) });
  });

  it('Requested → Abandoned, with or without a retry pending', () => {
    const fresh = accept(foldExecution(requested()), ev.abandoned('gone', { at: at(9) }));
    expect(statusOf(fresh)).toBe('Abandoned');
    expect(fresh.context).toMatchObject({ abandonReason: 'gone', finishedAt: at(9) });
    const pending = accept(foldExecution(retryPending()), ev.abandoned('gave up'));
    expect(statusOf(pending)).toBe('Abandoned');
    expect(pending.context.abandonReason).toBe('gave up');
  });

  it('Requested (retry pending) → Requested on ExecutionRetryScheduled, starting the next attempt', () => {
    const s = accept(foldExecution(retryPending()), ev.retryScheduled(2, { retryAt: at(60), at: at(7) }));
    expect(statusOf(s)).toBe('Requested');
    expect(s.context).toMatchObject({ attempt: 2, retryPending: false, retryAt: at(60), updatedAt: at(7) });
  });

  it('Scheduling → Scheduled on ExecutionHandedOff: the baton passes to the worker', () => {
    const s = accept(foldExecution(scheduling()), ev.handedOff('a', 1, { deadline: at(40), at: at(2) }));
    expect(statusOf(s)).toBe('Scheduled');
    expect(s.context).toMatchObject({
      owner: 'worker:a',
      workerId: 'a',
      deadline: at(40),
      scheduledAt: at(2),
      owners: ['executor', 'worker:a'],
    });
  });

  it('Scheduling → Cancelled on the executor’s ExecutionCancelled', () => {
    const s = accept(foldExecution(scheduling()), ev.cancelled('executor'));
    expect(statusOf(s)).toBe('Cancelled');
  });

  it('Scheduled → Running on the owner’s ExecutionStarted, with the start-to-close deadline', () => {
    const s = accept(foldExecution(scheduled()), ev.started('a', 1, { deadline: at(500), at: at(3) }));
    expect(statusOf(s)).toBe('Running');
    expect(s.context).toMatchObject({ startedAt: at(3), deadline: at(500), owner: 'worker:a' });
  });

  it('Scheduled → Running without a start-to-close deadline clears the handoff deadline', () => {
    const s = accept(foldExecution(scheduled()), ev.started('a', 1, { deadline: null }));
    expect(s.context.deadline).toBeNull();
  });

  it('Scheduled → Cancelled on the owning worker’s ExecutionCancelled', () => {
    const s = accept(foldExecution(scheduled()), ev.cancelled('a', 'not wanted'));
    expect(statusOf(s)).toBe('Cancelled');
    expect(s.context.cancelReason).toBe('not wanted');
  });

  it.each([
    ['OwnershipReleased', () => ev.released('a')],
    ['OwnershipReclaimed', () => ev.reclaimed('a', 1, 'schedule-to-start')],
  ])('Scheduled → Requested on %s: the executor owns again and must decide', (_, event) => {
    const s = accept(foldExecution(scheduled()), event());
    expect(statusOf(s)).toBe('Requested');
    expect(s.context).toMatchObject({
      owner: 'executor',
      workerId: null,
      retryPending: true,
      deadline: null,
      attempt: 1,
      owners: ['executor', 'worker:a', 'executor'],
    });
  });

  it('Running → Running on ExecutionProgressed', () => {
    const s = accept(foldExecution(running()), ev.progressed('a', { pct: 10 }, { at: at(4) }));
    expect(statusOf(s)).toBe('Running');
    expect(s.context).toMatchObject({ lastProgress: { pct: 10 }, lastProgressAt: at(4), updatedAt: at(4) });
    const again = accept(s, ev.progressed('a', { pct: 90 }, { at: at(8) }));
    expect(again.context).toMatchObject({ lastProgress: { pct: 90 }, lastProgressAt: at(8) });
  });

  it('Running → Completed on ExecutionCompleted', () => {
    const s = accept(foldExecution(running()), ev.completed('a', { answer: 42 }, { at: at(9) }));
    expect(statusOf(s)).toBe('Completed');
    expect(isFinal(s)).toBe(true);
    expect(s.context).toMatchObject({ result: { answer: 42 }, finishedAt: at(9), deadline: null });
  });

  it('Running → Requested on a retryable ExecutionFailed with attempts left', () => {
    const s = accept(foldExecution(running()), ev.failed('a', true, { message: 'flaky' }));
    expect(statusOf(s)).toBe('Requested');
    expect(s.context).toMatchObject({
      owner: 'executor',
      workerId: null,
      retryPending: true,
      deadline: null,
      error: { message: 'flaky', type: 'Error' },
    });
    expect(s.context.finishedAt).toBeUndefined();
  });

  it('Running → Failed on a non-retryable ExecutionFailed', () => {
    const s = accept(foldExecution(running()), ev.failed('a', false, { message: 'bad input', at: at(9) }));
    expect(statusOf(s)).toBe('Failed');
    expect(s.context).toMatchObject({ error: { message: 'bad input' }, finishedAt: at(9), owner: 'worker:a' });
  });

  it('Running → Failed on a retryable ExecutionFailed of the last attempt', () => {
    const s = accept(foldExecution([ev.requested({ maxAttempts: 1 }), ...running().slice(1)]), ev.failed('a', true));
    expect(statusOf(s)).toBe('Failed');
  });

  it('Running → Cancelled on the owner’s ExecutionCancelled', () => {
    const s = accept(foldExecution(running()), ev.cancelled('a'));
    expect(statusOf(s)).toBe('Cancelled');
  });

  it('Running → TimedOut when the executor enforces the recorded start-to-close deadline, and only that', () => {
    const s = foldExecution(running()); // started with deadline at(303)
    const enforced = accept(s, withBy(ev.timedOut('a', 'start-to-close', { at: at(400) }), 'executor'));
    expect(statusOf(enforced)).toBe('TimedOut');
    expect(enforced.context).toMatchObject({ timedOutLimit: 'start-to-close', finishedAt: at(400), owner: 'worker:a' });
    const otherDeadline = withBy({ ...ev.timedOut('a'), data: { limit: 'start-to-close' as const, deadline: at(999) } }, 'executor');
    expectRefused(s, otherDeadline, 'InvalidTransition', /is not the run's recorded deadline/);
    expectRefused(s, withBy(ev.timedOut('a', 'heartbeat'), 'executor'), 'InvalidTransition', /only enforce a start-to-close deadline/);
    const noDeadline = foldExecution([...scheduled(), ev.started('a', 1, { deadline: null })]);
    expectRefused(noDeadline, withBy(ev.timedOut('a'), 'executor'), 'InvalidTransition', /no start-to-close deadline was recorded/);
    expectRefused(s, withBy(ev.timedOut('a'), 'worker:b'), 'NotOwner');
  });

  it('Running → TimedOut on the owner’s ExecutionTimedOut', () => {
    const s = accept(foldExecution(running()), ev.timedOut('a', 'heartbeat', { at: at(9) }));
    expect(statusOf(s)).toBe('TimedOut');
    expect(s.context).toMatchObject({ timedOutLimit: 'heartbeat', finishedAt: at(9), deadline: null });
  });

  it.each([
    ['OwnershipReleased', () => ev.released('a')],
    ['OwnershipReclaimed', () => ev.reclaimed('a', 1, 'worker-lost')],
  ])('Running → Requested on %s', (_, event) => {
    const s = accept(foldExecution(running()), event());
    expect(statusOf(s)).toBe('Requested');
    expect(s.context).toMatchObject({ owner: 'executor', workerId: null, retryPending: true, deadline: null });
  });
});

describe('refusals', () => {
  describe('NotOwner', () => {
    it('worker:b sends ExecutionStarted while worker:a holds the baton', () => {
      expectRefused(foldExecution(scheduled()), ev.started('b', 1), 'NotOwner', 'worker:b is not the owner (owner is worker:a)');
    });

    it('worker:b sends ExecutionCompleted while worker:a runs it', () => {
      expectRefused(foldExecution(running()), ev.completed('b'), 'NotOwner');
    });

    it('the executor sends ExecutionCompleted (schema-invalid; the machine refuses on its own)', () => {
      expectRefused(foldExecution(running()), withBy(ev.completed('a'), 'executor'), 'NotOwner', /executor is not the owner/);
    });

    it('a worker sends SchedulingStarted', () => {
      expectRefused(foldExecution(requested()), withBy(ev.schedulingStarted(), 'worker:a'), 'NotOwner');
    });

    it('the executor cancels after the handoff', () => {
      expectRefused(foldExecution(scheduled()), ev.cancelled('executor'), 'NotOwner');
      expectRefused(foldExecution(running()), ev.cancelled('executor'), 'NotOwner');
    });

    it('a worker cancels while the executor owns', () => {
      expectRefused(foldExecution(retryPending()), ev.cancelled('a'), 'NotOwner', /owner is executor/);
    });

    it('a worker tries to reclaim', () => {
      expectRefused(
        foldExecution(running()),
        withBy(ev.reclaimed('a', 1), 'worker:a'),
        'NotOwner',
        'only the executor may reclaim ownership, not worker:a',
      );
    });

    it('the worker that lost the baton in a reclaim tries to start the new attempt', () => {
      const s = foldExecution([
        ...scheduled(),
        ev.reclaimed('a', 1),
        ev.retryScheduled(2),
        ev.schedulingStarted(),
        ev.handedOff('b', 2),
      ]);
      expectRefused(s, ev.started('a', 2), 'NotOwner');
    });
  });

  describe('AlreadyFinal', () => {
    const finals: [ExecutionStatus, () => ExecutionEvent[]][] = [
      ['Completed', () => [...running(), ev.completed('a')]],
      ['Failed', () => [...running(), ev.failed('a', false)]],
      ['Cancelled', () => [...scheduling(), ev.cancelled('executor')]],
      ['TimedOut', () => [...running(), ev.timedOut('a')]],
      ['Abandoned', () => [...retryPending(), ev.abandoned()]],
    ];

    it.each(finals)('%s accepts nothing', (status, history) => {
      const s = after(history(), status);
      expect(isFinal(s)).toBe(true);
      expect(allowedEventTypes(s)).toEqual([]);
      for (const event of [
        ev.cancelled('executor'),
        ev.cancelled('a'),
        ev.completed('a'),
        ev.progressed('a'),
        ev.reclaimed('a', 1),
        ev.retryScheduled(2),
        ev.abandoned(),
        ev.schedulingStarted(),
        ev.requested(),
      ]) {
        expectRefused(s, event, 'AlreadyFinal', `execution is already ${status}`);
      }
    });
  });

  describe('InvalidTransition', () => {
    it('ExecutionStarted in Requested', () => {
      expectRefused(
        foldExecution(requested()),
        ev.started('a', 1),
        'InvalidTransition',
        'ExecutionStarted is not allowed in state Requested',
      );
    });

    it('ExecutionHandedOff with another attempt than the current one', () => {
      expectRefused(
        foldExecution(scheduling()),
        ev.handedOff('a', 2),
        'InvalidTransition',
        'ExecutionHandedOff attempt 2 does not match current attempt 1',
      );
    });

    it('ExecutionHandedOff to a worker id no worker ref can carry', () => {
      const bad = { ...ev.handedOff('a', 1), data: { ...ev.handedOff('a', 1).data, workerId: 'a b' } };
      expectRefused(foldExecution(scheduling()), bad, 'InvalidTransition', /valid worker ref/);
    });

    it('ExecutionStarted by the owner with another attempt than the handoff’s', () => {
      expectRefused(foldExecution(scheduled()), ev.started('a', 2), 'InvalidTransition', /attempt 2 does not match current attempt 1/);
    });

    it('SchedulingStarted while a retry decision is pending', () => {
      expectRefused(foldExecution(retryPending()), ev.schedulingStarted(), 'InvalidTransition', /retry decision is pending/);
    });

    it('ExecutionRetryScheduled when no retry is pending', () => {
      expectRefused(foldExecution(requested()), ev.retryScheduled(2), 'InvalidTransition', /none is pending/);
    });

    it('ExecutionRetryScheduled skipping an attempt', () => {
      expectRefused(
        foldExecution([ev.requested({ maxAttempts: 5 }), ...retryPending().slice(1)]),
        ev.retryScheduled(3),
        'InvalidTransition',
        'ExecutionRetryScheduled attempt 3 must be 2 (current attempt 1)',
      );
    });

    it('ExecutionRetryScheduled beyond maxAttempts', () => {
      const s = foldExecution([ev.requested({ maxAttempts: 1 }), ...scheduled().slice(1), ev.reclaimed('a', 1)]);
      expect(s.context.retryPending).toBe(true);
      expectRefused(s, ev.retryScheduled(2), 'InvalidTransition', 'the next attempt (2) exceeds maxAttempts 1');
    });

    it('ExecutionRequested again, in any state', () => {
      for (const history of [requested(), scheduled(), running()]) {
        expectRefused(foldExecution(history), ev.requested(), 'InvalidTransition', /only ever the first event/);
      }
    });

    it('OwnershipReclaimed naming another worker or attempt', () => {
      expectRefused(foldExecution(running()), ev.reclaimed('b', 1), 'InvalidTransition', /names worker b but a holds/);
      expectRefused(foldExecution(running()), ev.reclaimed('a', 2), 'InvalidTransition', /attempt 2 does not match current attempt 1/);
    });

    it('a schedule-to-start reclaim after the worker started (the start won the race)', () => {
      expectRefused(
        foldExecution(running()),
        ev.reclaimed('a', 1, 'schedule-to-start'),
        'InvalidTransition',
        /schedule-to-start reclaim is only valid before the worker starts \(state is Running\)/,
      );
    });

    it('OwnershipReclaimed while the executor already owns', () => {
      expectRefused(foldExecution(requested()), ev.reclaimed('a', 1), 'InvalidTransition', /not allowed in state Requested/);
      expectRefused(foldExecution(scheduling()), ev.reclaimed('a', 1), 'InvalidTransition', /not allowed in state Scheduling/);
    });

    it('run-only events before the run starts, even from the owner', () => {
      const s = foldExecution(scheduled());
      expectRefused(s, ev.completed('a'), 'InvalidTransition', 'ExecutionCompleted is not allowed in state Scheduled');
      expectRefused(s, ev.progressed('a'), 'InvalidTransition');
      expectRefused(s, ev.timedOut('a'), 'InvalidTransition');
    });

    it('a second handoff', () => {
      expectRefused(foldExecution(scheduled()), ev.handedOff('b', 1), 'InvalidTransition', /not allowed in state Scheduled/);
    });
  });
});

describe('paths', () => {
  it('retry: a retryable failure, a retry, a new handoff to another worker, completion', () => {
    let s = foldExecution(running());
    s = accept(s, ev.failed('a', true, { message: 'flaky' }));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: true });
    expectRefused(s, ev.schedulingStarted(), 'InvalidTransition');
    s = accept(s, ev.retryScheduled(2));
    expect(s.context).toMatchObject({ attempt: 2, retryPending: false });
    s = accept(s, ev.schedulingStarted());
    expectRefused(s, ev.handedOff('b', 1), 'InvalidTransition');
    s = accept(s, ev.handedOff('b', 2, { at: at(12) }));
    expect(s.context).toMatchObject({ owner: 'worker:b', workerId: 'b', scheduledAt: at(12) });
    expectRefused(s, ev.started('b', 1), 'InvalidTransition');
    s = accept(s, ev.started('b', 2, { at: at(13) }));
    expectRefused(s, ev.completed('a'), 'NotOwner');
    s = accept(s, ev.completed('b', 'done', { at: at(14) }));
    expect(statusOf(s)).toBe('Completed');
    expect(s.context).toMatchObject({
      attempt: 2,
      result: 'done',
      startedAt: at(13),
      finishedAt: at(14),
      error: { message: 'flaky' },
      owners: ['executor', 'worker:a', 'executor', 'worker:b'],
    });
  });

  it('retry of a failure that reported progress starts the new run without the old progress', () => {
    const s = foldExecution([
      ...running(),
      ev.progressed('a', { pct: 70 }),
      ev.failed('a', true),
      ev.retryScheduled(2),
      ev.schedulingStarted(),
      ev.handedOff('a', 2),
      ev.started('a', 2),
    ]);
    expect(s.context.lastProgress).toBeUndefined();
    expect(s.context.lastProgressAt).toBeUndefined();
  });

  it('reclaim: schedule-to-start reclaim, retry on the same worker, worker lost, abandoned', () => {
    let s = foldExecution(scheduled());
    s = accept(s, ev.reclaimed('a', 1, 'schedule-to-start'));
    expectRefused(s, ev.started('a', 1), 'InvalidTransition');
    s = accept(s, ev.retryScheduled(2));
    s = accept(s, ev.schedulingStarted());
    s = accept(s, ev.handedOff('a', 2));
    s = accept(s, ev.started('a', 2));
    s = accept(s, ev.reclaimed('a', 2, 'worker-lost'));
    expect(s.context).toMatchObject({ attempt: 2, retryPending: true, owner: 'executor' });
    expect(allowedEventTypes(s)).toEqual(['ExecutionCancelled', 'ExecutionAbandoned']);
    expectRefused(s, ev.retryScheduled(3), 'InvalidTransition', /exceeds maxAttempts 2/);
    s = accept(s, ev.abandoned('no attempts left'));
    expect(statusOf(s)).toBe('Abandoned');
    expect(s.context.owners).toEqual(['executor', 'worker:a', 'executor', 'worker:a', 'executor']);
  });
});

describe('foldExecution', () => {
  it('gives what deciding one event at a time gives', () => {
    const events = [...retryPending(), ev.retryScheduled(2), ev.schedulingStarted(), ev.handedOff('b', 2), ev.started('b', 2)];
    let stepwise = startExecution(events[0]!);
    for (const event of events.slice(1)) stepwise = accept(stepwise, event);
    const folded = foldExecution(events);
    expect(folded.value).toBe(stepwise.value);
    expect(folded.context).toEqual(stepwise.context);
    // A folded snapshot is an ordinary snapshot: decisions continue from it.
    expect(statusOf(accept(folded, ev.completed('b')))).toBe('Completed');
  });

  it('refuses an empty history', () => {
    expect(() => foldExecution([])).toThrow(/event 0 must be ExecutionRequested/);
  });

  it('refuses a history that does not start with ExecutionRequested', () => {
    expect(() => foldExecution([ev.schedulingStarted(), ev.handedOff('a', 1)])).toThrow(/event 0 \(SchedulingStarted\)/);
  });

  it('names the index, type and reason of the first refused event', () => {
    expect(() => foldExecution([...scheduling(), ev.started('a', 1), ev.completed('a')])).toThrow(
      'event 2 (ExecutionStarted) refused in state Scheduling: InvalidTransition: ExecutionStarted is not allowed in state Scheduling',
    );
    expect(() => foldExecution([...running(), ev.completed('b')])).toThrow(/event 4 \(ExecutionCompleted\) .*NotOwner/);
    expect(() => foldExecution([...running(), ev.completed('a'), ev.cancelled('a')])).toThrow(
      /event 5 \(ExecutionCancelled\) .*AlreadyFinal/,
    );
  });

  it('throws, synchronously, when the first event cannot build a context', () => {
    const broken = { type: 'ExecutionRequested', metadata: { by: 'executor', occurredAt: at(0) } } as unknown as ExecutionEvent;
    expect(() => foldExecution([broken])).toThrow(/event 0 \(ExecutionRequested\) could not be applied/);
  });
});

describe('allowedEventTypes', () => {
  it.each<[string, () => ExecutionEvent[], string[]]>([
    ['Requested', requested, ['SchedulingStarted', 'ExecutionHandedOff', 'ExecutionCancelled', 'ExecutionAbandoned']],
    ['Requested, retry pending', retryPending, ['ExecutionRetryScheduled', 'ExecutionCancelled', 'ExecutionAbandoned']],
    ['Scheduling', scheduling, ['ExecutionHandedOff', 'ExecutionCancelled']],
    ['Scheduled', scheduled, ['ExecutionStarted', 'ExecutionCancelled', 'ExecutionCancelRequested', 'OwnershipReleased', 'OwnershipReclaimed']],
    ['Scheduled, cancel requested', () => [...scheduled(), ev.cancelRequested()], ['ExecutionCancelled', 'OwnershipReleased', 'OwnershipReclaimed']],
    ['Requested, retry pending after a cancel request', () => [...running(), ev.cancelRequested(), ev.reclaimed('a', 1, 'worker-lost')], ['ExecutionCancelled', 'ExecutionAbandoned']],
    [
      'Running',
      running,
      [
        'ExecutionProgressed',
        'ExecutionTagged',
        'ExecutionCompleted',
        'ExecutionFailed',
        'ExecutionCancelled',
        'ExecutionCancelRequested',
        'ExecutionTimedOut',
        'OwnershipReleased',
        'OwnershipReclaimed',
      ],
    ],
  ])('%s', (_, history, expected) => {
    expect(allowedEventTypes(foldExecution(history())).sort()).toEqual([...expected].sort());
  });
});

describe('tags (machine version 5)', () => {
  it('ExecutionRequested carries the submitter’s tags into the context; none means no key', () => {
    expect(startExecution(ev.requested({ tags: { customer: 'c-42' } })).context.tags).toEqual({ customer: 'c-42' });
    expect('tags' in startExecution(ev.requested()).context).toBe(false);
  });

  it('the running owner adds tags: merged, a key already there takes the new value; not progress, the state stays', () => {
    const before = foldExecution([ev.requested({ tags: { customer: 'c-1', team: 'x' } }), ...running().slice(1)]);
    const s = accept(before, ev.tagged('a', { customer: 'c-42', region: 'eu' }));
    expect(statusOf(s)).toBe('Running');
    expect(s.context.tags).toEqual({ customer: 'c-42', team: 'x', region: 'eu' });
    expect(s.context.lastProgressAt).toBe(before.context.lastProgressAt);
    expect(s.context.owner).toBe('worker:a');
  });

  it('is refused from anyone but the owner, outside Running, and past the tag limit', () => {
    const s = foldExecution(running());
    expectRefused(s, ev.tagged('b'), 'NotOwner');
    expectRefused(s, withBy(ev.tagged('a'), 'executor'), 'NotOwner');
    expectRefused(foldExecution(scheduled()), ev.tagged('a'), 'InvalidTransition');
    expectRefused(foldExecution(requested()), withBy(ev.tagged('a'), 'executor'), 'InvalidTransition');
    const full = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, 'v']));
    const atLimit = accept(s, ev.tagged('a', full));
    expect(Object.keys(atLimit.context.tags!)).toHaveLength(32);
    expect(accept(atLimit, ev.tagged('a', { k0: 'new' })).context.tags!.k0).toBe('new'); // replacing is not adding
    expectRefused(atLimit, ev.tagged('a', { one: 'more' }), 'InvalidTransition', /33 tags; at most 32/);
  });

  it('the catalog refuses bad tags, naming the tag', () => {
    const bad = (tags: unknown) => ExecutionEvent.safeParse({ ...ev.tagged('a'), data: { tags } });
    expect(bad({}).success).toBe(false);
    expect(bad({ 'a=b': 'x' }).error?.issues[0]?.message).toMatch(/may contain only letters, digits/);
    expect(bad({ k: 'x\u0000' }).error?.issues[0]).toMatchObject({ path: ['data', 'tags', 'k'], message: expect.stringMatching(/NUL/) });
    expect(bad({ k: 'v'.repeat(257) }).error?.issues[0]?.message).toMatch(/at most 256/);
    expect(ExecutionEvent.safeParse({ ...ev.requested(), data: { ...ev.requested().data, tags: { ['k'.repeat(65)]: 'v' } } }).success).toBe(false);
  });
});

describe('cancel requests (machine version 3)', () => {
  it('the executor records one while a worker holds the baton; the owner does not change', () => {
    for (const history of [scheduled, running]) {
      const before = foldExecution(history());
      const s = accept(before, ev.cancelRequested('user asked'));
      expect(statusOf(s)).toBe(statusOf(before));
      expect(s.context.owner).toBe('worker:a');
      expect(s.context.cancelRequested).toBe('user asked');
    }
  });

  it('only the executor records one, once, and only while a worker holds the baton', () => {
    expectRefused(foldExecution(running()), withBy(ev.cancelRequested(), 'worker:a'), 'NotOwner', 'only the executor records a cancel request, not worker:a');
    expectRefused(foldExecution([...running(), ev.cancelRequested('first')]), ev.cancelRequested('second'), 'InvalidTransition', 'a cancel was already requested (first)');
    expectRefused(foldExecution(requested()), ev.cancelRequested(), 'InvalidTransition', 'ExecutionCancelRequested is not allowed in state Requested');
    expectRefused(foldExecution([...running(), ev.completed('a')]), ev.cancelRequested(), 'AlreadyFinal');
  });

  it('a handoff with a cancel request may not start; its worker cancels it', () => {
    const s = foldExecution([...scheduled(), ev.cancelRequested('stop')]);
    expectRefused(s, ev.started('a', 1), 'InvalidTransition', 'a cancel was requested before the run started (stop): the owner must append ExecutionCancelled');
    expect(statusOf(accept(s, ev.cancelled('a', 'stop')))).toBe('Cancelled');
  });

  it('a run that finishes first still finishes', () => {
    expect(statusOf(accept(foldExecution([...running(), ev.cancelRequested()]), ev.completed('a')))).toBe('Completed');
  });

  it('a baton that comes back after a cancel request is not retried: the executor cancels it', () => {
    for (const back of [ev.reclaimed('a', 1, 'worker-lost'), ev.released('a'), ev.failed('a', true)]) {
      const s = foldExecution([...running(), ev.cancelRequested('stop'), back]);
      expect(s.context.owner).toBe('executor');
      expectRefused(s, ev.retryScheduled(2), 'InvalidTransition', 'a cancel was requested (stop): ExecutionCancelled must come next, not a retry');
      const done = accept(s, ev.cancelled('executor', 'stop'));
      expect(statusOf(done)).toBe('Cancelled');
      expect(done.context.cancelReason).toBe('stop');
    }
  });
});
