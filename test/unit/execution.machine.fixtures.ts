// Shared fixtures for the execution machine's tests (execution.machine.*.test.ts): histories
// that reach each live state, and the accept / expect-refused helpers.
import { expect } from 'vitest';
import { transition } from 'xstate';
import type { ExecutionEvent } from '../../schemas/events.ts';
import {
  decideExecution,
  executionMachine,
  type ExecutionSnapshot,
  type Rejection,
} from '../../actors/execution.machine.ts';
import { ev } from '../support/execution-paths.ts';

// Histories that reach each live state with worker a, attempt 1.
export const requested = () => [ev.requested()];
export const scheduling = () => [...requested(), ev.schedulingStarted()];
export const scheduled = () => [...scheduling(), ev.handedOff('a', 1)];
export const running = () => [...scheduled(), ev.started('a', 1)];
/** Back in Requested with a retry pending, after a retryable failure of attempt 1. */
export const retryPending = () => [...running(), ev.failed('a', true)];

export function accept(snapshot: ExecutionSnapshot, event: ExecutionEvent): ExecutionSnapshot {
  const decision = decideExecution(snapshot, event);
  if (!decision.ok) throw new Error(`expected ${event.type} to be accepted: ${decision.rejection}: ${decision.reason}`);
  return decision.snapshot;
}

/**
 * Asserts the refusal and its class, and that nothing moved: neither through the decision
 * nor through the machine itself (the guards refuse, not only the classifier).
 */
export function expectRefused(
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
