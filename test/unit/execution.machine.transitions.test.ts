// The execution machine's legal transitions: each accepted (state, event) pair and the
// context it leaves.
import { describe, it, expect } from 'vitest';
import { foldExecution, isFinal, statusOf } from '../../actors/execution.machine.ts';
import { at, ev, withBy } from '../support/execution-paths.ts';
import { accept, expectRefused, requested, retryPending, running, scheduled, scheduling } from './execution.machine.fixtures.ts';

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
    // The executor ended it instead of retrying: no retry is pending any more.
    expect(pending.context.retryPending).toBe(false);
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
    ['OwnershipReclaimed', () => ev.reclaimed('a', 1, 'worker-lost')],
  ])('Scheduled → Requested on %s: the executor owns again, and the unstarted attempt waits for its next handoff (machine v8)', (_, event) => {
    const s = accept(foldExecution(scheduled()), event());
    expect(statusOf(s)).toBe('Requested');
    expect(s.context).toMatchObject({
      owner: 'executor',
      workerId: null,
      retryPending: false,
      deadline: null,
      attempt: 1,
      owners: ['executor', 'worker:a', 'executor'],
    });
  });

  it('Scheduled → Requested on a schedule-to-start reclaim: the handoff was not started in time, and the executor must decide (the attempt is spent)', () => {
    const s = accept(foldExecution(scheduled()), ev.reclaimed('a', 1, 'schedule-to-start'));
    expect(s.context).toMatchObject({ owner: 'executor', retryPending: true, attempt: 1 });
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
