// The execution machine's basics: the event builders, starting an execution from
// ExecutionRequested, and its exported states and version.
import { describe, it, expect } from 'vitest';
import {
  MACHINE_VERSION,
  executionStatuses,
  isFinal,
  startExecution,
  statusOf,
  finalStatuses,
} from '../../actors/execution.machine.ts';
import { at, ev } from '../support/execution-paths.ts';

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
    expect(MACHINE_VERSION).toBe('8');
    expect([...finalStatuses].sort()).toEqual(['Abandoned', 'Cancelled', 'Completed', 'Failed', 'TimedOut']);
  });
});
