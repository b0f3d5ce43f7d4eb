// Whether a dead letter still stands, from its execution's history (the record; the transport
// only keeps the message). A message becomes a dead letter only after max-deliver ack-waits
// (minutes), and by then its execution has often moved on without it: reclaimed at its
// schedule-to-start deadline and retried elsewhere, or ended. Such a dead letter is *settled*:
// nothing waits on it, and listing it as dead work misleads. It is *outstanding* while its
// execution still waits on it (that worker holds that attempt: the executor abandons it, or an
// operator retries it), or once the execution was abandoned for it (the executor's reason names
// the message). Every front door that lists dead letters (baton dlq, GraphQL deadLetters, the
// console) says which, from here, so they agree, whichever transport holds the letters.
import { isFinal, statusOf, type ExecutionStatus } from '../../actors/execution.machine.ts';
import { mapLimit } from '../async/map-limit.ts';
import { NotFoundError } from '../errors.ts';
import type { DeadLetter } from '../transport/work-transport.ts';
import type { ExecutionRuntime, LoadedExecution } from './execution-runtime.ts';

export type Standing = 'outstanding' | 'settled';

export interface DeadLetterStanding {
  standing: Standing;
  /** Why, for people: e.g. "its execution moved on to attempt 2 (Completed)". */
  reason: string;
  /** The execution now, from the event store; null when it is not there. */
  execution: { status: ExecutionStatus; attempt: number } | null;
}

/** Loads at once while standing a page of dead letters (a page is at most 1,000). */
const LOADS_IN_FLIGHT = 8;

/** The standing of `d` given its execution as loaded now (undefined: not in the event store). */
export function standingOf(d: Pick<DeadLetter, 'messageId' | 'workerId' | 'message'>, loaded: Pick<LoadedExecution, 'snapshot'> | undefined): DeadLetterStanding {
  if (!loaded) return { standing: 'settled', reason: 'its execution is not in the event store (archived or never stored)', execution: null };
  const s = loaded.snapshot;
  const { attempt, abandonReason, owner } = s.context;
  const status = statusOf(s);
  const now = { status, attempt };
  const settled = (reason: string): DeadLetterStanding => ({ standing: 'settled', reason, execution: now });
  const outstanding = (reason: string): DeadLetterStanding => ({ standing: 'outstanding', reason, execution: now });
  const mine = d.message.attempt;
  // One handoff per attempt (a new attempt starts only with ExecutionRetryScheduled), so the attempt names the handoff.
  if (attempt > mine) return settled(`its execution moved on to attempt ${attempt} (${status})`);
  if (attempt < mine) return settled(`its execution has no attempt ${mine} (it is at attempt ${attempt}, ${status})`);
  if (!isFinal(s)) {
    return owner === `worker:${d.workerId}`
      ? outstanding(`its execution still waits on this message at worker ${d.workerId} (attempt ${attempt}, ${status})`)
      : settled(`its execution no longer waits on worker ${d.workerId} for attempt ${attempt} (${status}${s.context.retryPending ? ', a retry pending' : ''})`);
  }
  // The executor's abandonment for a dead letter names it (`baton dlq show <messageId>`: executor/monitor/runs.ts).
  if (status === 'Abandoned' && abandonReason?.includes(d.messageId)) return outstanding(`its execution was abandoned for it (attempt ${attempt})`);
  return settled(`its execution ended without it (${status}, attempt ${attempt})`);
}

/** The standing of each dead letter, in order, each read from the event store now. */
export async function standingsOf(runtime: Pick<ExecutionRuntime, 'load'>, deadLetters: readonly DeadLetter[]): Promise<DeadLetterStanding[]> {
  return mapLimit(deadLetters, LOADS_IN_FLIGHT, async (d) => standingOf(d, await loadIfStored(runtime, d.message.executionId)));
}

/** The execution as loaded now, or undefined when the event store does not have it (archived or never stored). */
export async function loadIfStored(runtime: Pick<ExecutionRuntime, 'load'>, executionId: string): Promise<LoadedExecution | undefined> {
  try {
    return await runtime.load(executionId);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}
