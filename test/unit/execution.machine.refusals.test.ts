// The execution machine's refusals, by class: NotOwner, AlreadyFinal and InvalidTransition;
// each leaves the snapshot unmoved.
import { describe, it, expect } from 'vitest';
import type { ExecutionEvent } from '../../schemas/events.ts';
import {
  allowedEventTypes,
  foldExecution,
  isFinal,
  statusOf,
  type ExecutionStatus,
} from '../../actors/execution.machine.ts';
import { ev, withBy } from '../support/execution-paths.ts';
import { expectRefused, requested, retryPending, running, scheduled, scheduling } from './execution.machine.fixtures.ts';

const after = (events: ExecutionEvent[], status: ExecutionStatus) => {
  const snapshot = foldExecution(events);
  expect(statusOf(snapshot)).toBe(status);
  return snapshot;
};

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
        ...running(),
        ev.reclaimed('a', 1, 'worker-lost'),
        ev.retryScheduled(2),
        ev.schedulingStarted(),
        ev.handedOff('b', 2),
      ]);
      expectRefused(s, ev.started('a', 2), 'NotOwner');
      // An unstarted handoff reclaimed: the same attempt, handed to another worker.
      const again = foldExecution([...scheduled(), ev.reclaimed('a', 1, 'worker-lost'), ev.handedOff('b', 1)]);
      expectRefused(again, ev.started('a', 1), 'NotOwner');
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
      const s = foldExecution([ev.requested({ maxAttempts: 1 }), ...running().slice(1), ev.reclaimed('a', 1, 'worker-lost')]);
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
