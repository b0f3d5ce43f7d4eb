// The execution machine over whole histories: retry and reclaim paths, foldExecution, and the
// event types each state allows.
import { describe, it, expect } from 'vitest';
import type { ExecutionEvent } from '../../schemas/events.ts';
import { allowedEventTypes, foldExecution, startExecution, statusOf } from '../../actors/execution.machine.ts';
import { at, ev } from '../support/execution-paths.ts';
import { accept, expectRefused, requested, retryPending, running, scheduled, scheduling } from './execution.machine.fixtures.ts';

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

  it('reclaim: a handoff not started in time spends its attempt; one whose worker was lost before starting keeps it; a run reclaimed spends it; then abandoned', () => {
    let s = foldExecution(scheduled());
    s = accept(s, ev.reclaimed('a', 1, 'schedule-to-start'));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: true, owner: 'executor' });
    expectRefused(s, ev.started('a', 1), 'InvalidTransition');
    s = accept(s, ev.retryScheduled(2));
    s = accept(s, ev.handedOff('a', 2));
    // Its worker lost before it started: the action never ran, the same attempt waits for its next handoff.
    s = accept(s, ev.reclaimed('a', 2, 'worker-lost'));
    expect(s.context).toMatchObject({ attempt: 2, retryPending: false, owner: 'executor' });
    expectRefused(s, ev.retryScheduled(3), 'InvalidTransition', /needs a pending retry/);
    s = accept(s, ev.handedOff('b', 2));
    s = accept(s, ev.started('b', 2));
    s = accept(s, ev.reclaimed('b', 2, 'worker-lost'));
    expect(s.context).toMatchObject({ attempt: 2, retryPending: true, owner: 'executor' });
    expect(allowedEventTypes(s)).toEqual(['ExecutionCancelled', 'ExecutionAbandoned']);
    expectRefused(s, ev.retryScheduled(3), 'InvalidTransition', /exceeds maxAttempts 2/);
    s = accept(s, ev.abandoned('no attempts left'));
    expect(statusOf(s)).toBe('Abandoned');
    expect(s.context.owners).toEqual(['executor', 'worker:a', 'executor', 'worker:a', 'executor', 'worker:b', 'executor']);
  });

  it.each(['worker-restarted', 'drain', 'manual'] as const)('reclaim (%s) of an unstarted handoff keeps its attempt', (reason) => {
    const s = accept(foldExecution(scheduled()), ev.reclaimed('a', 1, reason));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: false, owner: 'executor' });
  });

  it('an execution keeps its attempt on at most 3 unstarted returns; the 4th spends it (a worker that dies on a handoff cannot keep it going round)', () => {
    let s = foldExecution(scheduled());
    for (const [from, to] of [['a', 'b'], ['b', 'c'], ['c', 'a']]) {
      s = accept(s, ev.reclaimed(from!, 1, 'worker-restarted'));
      expect(s.context).toMatchObject({ attempt: 1, retryPending: false });
      s = accept(s, ev.handedOff(to!, 1));
    }
    s = accept(s, ev.released('a'));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: true });
    s = accept(s, ev.retryScheduled(2));
    s = accept(s, ev.handedOff('b', 2));
    s = accept(s, ev.reclaimed('b', 2, 'drain'));
    expect(s.context).toMatchObject({ attempt: 2, retryPending: true }); // still past the 3
  });

  it('reclaim: an unstarted handoff with a cancel request comes back for the executor to decide (it cancels)', () => {
    let s = foldExecution(scheduled());
    s = accept(s, ev.cancelRequested());
    s = accept(s, ev.reclaimed('a', 1, 'worker-lost'));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: true });
    s = accept(s, ev.cancelled('executor'));
    expect(statusOf(s)).toBe('Cancelled');
  });

  it('a released handoff (the worker gave it back before starting) keeps its attempt too', () => {
    let s = foldExecution(scheduled());
    s = accept(s, ev.released('a'));
    expect(s.context).toMatchObject({ attempt: 1, retryPending: false, owner: 'executor' });
    s = accept(s, ev.handedOff('b', 1));
    expect(s.context).toMatchObject({ attempt: 1, owner: 'worker:b' });
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
