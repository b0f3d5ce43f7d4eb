// Events later machine versions added: tags (version 5) and cancel requests (version 3).
import { describe, it, expect } from 'vitest';
import { ExecutionEvent } from '../../schemas/events.ts';
import { foldExecution, startExecution, statusOf } from '../../actors/execution.machine.ts';
import { ev, withBy } from '../support/execution-paths.ts';
import { accept, expectRefused, requested, running, scheduled } from './execution.machine.fixtures.ts';

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
