import { describe, it, expect } from 'vitest';
import { transition } from 'xstate';
import { ExecutionEvent, executionEventTypes, type ExecutionEventType } from '../../schemas/events.ts';
import {
  allowedEventTypes,
  decideExecution,
  executionMachine,
  executionStatuses,
  foldExecution,
  isFinal,
  startExecution,
  statusOf,
  type ExecutionContext,
  type ExecutionSnapshot,
} from '../../actors/execution.machine.ts';
import { at, generateExecutionPaths, pathAlphabet } from '../support/execution-paths.ts';

const paths = generateExecutionPaths();

/** One event of `type` that fits `context` as well as it can: right sender, attempt and worker. */
function representative(type: ExecutionEventType, context: ExecutionContext): ExecutionEvent {
  const by = type === 'OwnershipReclaimed' || type === 'ExecutionCancelRequested' ? 'executor' : context.owner;
  const metadata = { by, occurredAt: at(100) };
  const workerId = context.workerId ?? 'a';
  const data = {
    ExecutionRequested: { action: 'x', input: null, maxAttempts: 2 },
    SchedulingStarted: {},
    ExecutionHandedOff: { workerId: 'a', attempt: context.attempt, deadline: at(130) },
    ExecutionStarted: { attempt: context.attempt },
    ExecutionProgressed: { details: 1 },
    ExecutionTagged: { tags: { customer: 'c-42' } },
    ExecutionCompleted: { result: 1 },
    ExecutionFailed: { error: { message: 'x' }, retryable: true },
    ExecutionCancelled: { reason: 'x' },
    ExecutionCancelRequested: { reason: 'x' },
    ExecutionTimedOut: { limit: 'stall', deadline: at(100) },
    OwnershipReclaimed: { reason: 'manual', workerId, attempt: context.attempt },
    OwnershipReleased: { reason: 'x' },
    ExecutionRetryScheduled: { attempt: context.attempt + 1, retryAt: at(110), reason: 'x' },
    ExecutionAbandoned: { reason: 'x' },
  }[type];
  // Not schema-parsed on purpose: for a worker-only type in an executor-owned state the
  // fitting sender is the executor, which the schema would reject before the machine could.
  return { type, data, metadata } as ExecutionEvent;
}

describe('generated execution paths', () => {
  it('are bounded: a few dozen to a few thousand', () => {
    expect(paths.length).toBeGreaterThanOrEqual(30);
    expect(paths.length).toBeLessThanOrEqual(4000);
  });

  it('reach every state of the machine', () => {
    const reached = new Set(paths.map((p) => p.finalStatus));
    expect([...reached].sort()).toEqual([...executionStatuses].sort());
  });

  it('use every event type', () => {
    const used = new Set(paths.flatMap((p) => p.events.map((e) => e.type)));
    expect([...used].sort()).toEqual([...executionEventTypes].sort());
  });

  it('hold only catalog events, starting with ExecutionRequested and never repeating it', () => {
    for (const path of paths) {
      expect(path.events[0]?.type).toBe('ExecutionRequested');
      expect(path.events.slice(1).some((e) => e.type === 'ExecutionRequested')).toBe(false);
      for (const event of path.events) expect(ExecutionEvent.safeParse(event).success).toBe(true);
    }
  });

  it('fold to exactly the state and context the traversal reached', () => {
    for (const path of paths) {
      const folded = foldExecution(path.events);
      expect(statusOf(folded)).toBe(path.finalStatus);
      expect(folded.context).toEqual(path.finalContext);
      expect(isFinal(folded)).toBe(isFinal(path.finalSnapshot));
    }
  });

  it('fold to the same state when decided one event at a time', () => {
    for (const path of paths) {
      let snapshot = startExecution(path.events[0]!);
      path.events.slice(1).forEach((event, i) => {
        const decision = decideExecution(snapshot, event);
        if (!decision.ok) throw new Error(`path event ${i + 1} refused: ${decision.reason}`);
        snapshot = decision.snapshot;
      });
      expect(statusOf(snapshot)).toBe(path.finalStatus);
      expect(snapshot.context).toEqual(path.finalContext);
    }
  });

  it('survive storage: a JSON round trip folds to the same state', () => {
    for (const path of paths) {
      const stored = JSON.parse(JSON.stringify(path.events)) as unknown[];
      const reread = stored.map((e) => ExecutionEvent.parse(e));
      const folded = foldExecution(reread);
      expect(statusOf(folded)).toBe(path.finalStatus);
      expect(folded.context).toEqual(path.finalContext);
      expect(JSON.parse(JSON.stringify(folded.context))).toEqual(JSON.parse(JSON.stringify(path.finalContext)));
    }
  });

  it('keep the owners route well formed', () => {
    for (const { finalContext: c } of paths) {
      expect(c.owners[0]).toBe('executor');
      expect(c.owners[c.owners.length - 1]).toBe(c.owner);
      c.owners.forEach((o, i) => expect(o).not.toBe(c.owners[i - 1]));
      expect(c.owner === 'executor').toBe(c.workerId === null);
    }
  });

  it('leave nothing pending in a final state: no dwell limit, no retry to come', () => {
    const ended = paths.filter((p) => isFinal(p.finalSnapshot));
    expect(ended.length).toBeGreaterThan(0);
    for (const { finalContext: c, finalStatus } of ended) {
      expect({ finalStatus, deadline: c.deadline, retryPending: c.retryPending }).toEqual({ finalStatus, deadline: null, retryPending: false });
    }
  });

  it('leave the state alone on every alphabet event the machine refuses', () => {
    const alphabet = pathAlphabet();
    for (const { finalSnapshot } of paths) {
      for (const event of alphabet) {
        const decision = decideExecution(finalSnapshot, event);
        if (decision.ok) continue;
        expect(decision.reason.length).toBeGreaterThan(0);
        if (isFinal(finalSnapshot)) expect(decision.rejection).toBe('AlreadyFinal');
        const [next] = transition(executionMachine, finalSnapshot, event);
        expect(next.value).toBe(finalSnapshot.value);
        expect(next.context).toBe(finalSnapshot.context);
      }
    }
  });

  it('agree with allowedEventTypes: a fitting event is accepted exactly when its type is allowed', () => {
    const seen = new Set<string>();
    const snapshots: ExecutionSnapshot[] = [];
    for (const { finalSnapshot: s } of paths) {
      const key = JSON.stringify({ value: s.value, context: s.context });
      if (!seen.has(key)) {
        seen.add(key);
        snapshots.push(s);
      }
    }
    let accepted = 0;
    for (const snapshot of snapshots) {
      const allowed = allowedEventTypes(snapshot);
      for (const type of executionEventTypes) {
        const decision = decideExecution(snapshot, representative(type, snapshot.context));
        const label = `${type} in ${statusOf(snapshot)} (retryPending ${snapshot.context.retryPending}, attempt ${snapshot.context.attempt})`;
        expect(decision.ok, label).toBe(allowed.includes(type));
        if (decision.ok) accepted++;
      }
    }
    expect(accepted).toBeGreaterThan(0);
  });
});

