// Event builders and generated paths for the execution machine's tests.
// Builders validate every event with the catalog's schema, so tests cannot drift from it;
// `withBy` is the one deliberate escape hatch, for proving the machine refuses on its own.
import { getShortestPaths } from '@xstate/graph';
import { ExecutionEvent, type ExecutionEventOf } from '../../schemas/events.ts';
import {
  executionMachine,
  statusOf,
  type ExecutionContext,
  type ExecutionSnapshot,
  type ExecutionStatus,
} from '../../actors/execution.machine.ts';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
/** A fixed instant `seconds` after the test epoch: deterministic, and ISO like a real clock reading. */
export const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

/**
 * Options every builder takes: when it happened. Defaults are fixed per event type, and
 * differ between release (5 s) and reclaim (6 s) so the two leave distinct contexts and the
 * generated paths keep both.
 */
export interface At {
  at?: string;
}

type RequestedData = ExecutionEventOf<'ExecutionRequested'>['data'];
type Json = RequestedData['input'];

const build = <T extends ExecutionEvent['type']>(
  type: T,
  data: ExecutionEventOf<T>['data'],
  by: string,
  occurredAt: string,
): ExecutionEventOf<T> =>
  ExecutionEvent.parse({ type, data, metadata: { by, occurredAt } }) as ExecutionEventOf<T>;

const worker = (workerId: string) => `worker:${workerId}`;

export const ev = {
  requested: (data: Partial<RequestedData> = {}, o: At = {}) =>
    build(
      'ExecutionRequested',
      { action: 'http.get', input: { url: 'https://example.test/' }, maxAttempts: 2, ...data },
      'executor',
      o.at ?? at(0),
    ),
  /** With `maxAttempts`, the attempt limit the executor records for this attempt. */
  schedulingStarted: (o: At & { maxAttempts?: number } = {}) =>
    build('SchedulingStarted', o.maxAttempts === undefined ? {} : { maxAttempts: o.maxAttempts }, 'executor', o.at ?? at(1)),
  /** With `actionVersion`, the action version the attempt is handed off to run; with `maxAttempts`, the attempt limit it records (machine version 7). */
  handedOff: (workerId: string, attempt: number, o: At & { deadline?: string; actionVersion?: number; maxAttempts?: number } = {}) =>
    build(
      'ExecutionHandedOff',
      {
        workerId,
        attempt,
        deadline: o.deadline ?? at(32),
        ...(o.actionVersion !== undefined && { actionVersion: o.actionVersion }),
        ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }),
      },
      'executor',
      o.at ?? at(2),
    ),
  /** `deadline: null` leaves the start-to-close deadline out; `actionVersion`, the version the worker runs. */
  started: (workerId: string, attempt: number, o: At & { deadline?: string | null; actionVersion?: number } = {}) =>
    build(
      'ExecutionStarted',
      {
        attempt,
        ...(o.deadline !== null && { deadline: o.deadline ?? at(303) }),
        ...(o.actionVersion !== undefined && { actionVersion: o.actionVersion }),
      },
      worker(workerId),
      o.at ?? at(3),
    ),
  progressed: (workerId: string, details: Json = { pct: 50 }, o: At = {}) =>
    build('ExecutionProgressed', { details }, worker(workerId), o.at ?? at(4)),
  tagged: (workerId: string, tags: Record<string, string> = { customer: 'c-42' }, o: At = {}) =>
    build('ExecutionTagged', { tags }, worker(workerId), o.at ?? at(4)),
  completed: (workerId: string, result: Json = { ok: true }, o: At = {}) =>
    build('ExecutionCompleted', { result }, worker(workerId), o.at ?? at(5)),
  failed: (workerId: string, retryable: boolean, o: At & { message?: string } = {}) =>
    build(
      'ExecutionFailed',
      { error: { message: o.message ?? 'boom', type: 'Error' }, retryable },
      worker(workerId),
      o.at ?? at(5),
    ),
  /** `by` is 'executor' or a bare worker id. */
  cancelled: (by: string, reason = 'user asked', o: At = {}) =>
    build('ExecutionCancelled', { reason }, by === 'executor' ? by : worker(by), o.at ?? at(5)),
  cancelRequested: (reason = 'user asked', o: At = {}) => build('ExecutionCancelRequested', { reason }, 'executor', o.at ?? at(4)),
  timedOut: (workerId: string, limit: 'start-to-close' | 'heartbeat' | 'stall' = 'start-to-close', o: At = {}) =>
    build('ExecutionTimedOut', { limit, deadline: at(303) }, worker(workerId), o.at ?? at(5)),
  reclaimed: (
    workerId: string,
    attempt: number,
    reason: ExecutionEventOf<'OwnershipReclaimed'>['data']['reason'] = 'schedule-to-start',
    o: At = {},
  ) => build('OwnershipReclaimed', { reason, workerId, attempt }, 'executor', o.at ?? at(6)),
  released: (workerId: string, reason = 'draining', o: At = {}) =>
    build('OwnershipReleased', { reason }, worker(workerId), o.at ?? at(5)),
  retryScheduled: (attempt: number, o: At & { retryAt?: string } = {}) =>
    build(
      'ExecutionRetryScheduled',
      { attempt, retryAt: o.retryAt ?? at(10), reason: 'backoff' },
      'executor',
      o.at ?? at(7),
    ),
  abandoned: (reason = 'no attempts left', o: At = {}) =>
    build('ExecutionAbandoned', { reason }, 'executor', o.at ?? at(7)),
};

/**
 * The same event appended by someone else, WITHOUT schema validation: lets a test send
 * what the schema forbids (an executor's ExecutionCompleted) to prove the machine refuses
 * it by itself.
 */
export const withBy = <E extends ExecutionEvent>(event: E, by: string): E =>
  ({ ...event, metadata: { ...event.metadata, by } }) as E;

// ---------------------------------------------------------------------------
// Generated paths

/** Two workers, maxAttempts 2: small enough to enumerate, big enough for retries and races. */
export const PATH_WORKERS = ['a', 'b'] as const;
export const PATH_MAX_ATTEMPTS = 2;

/**
 * Concrete candidate events, including ones the machine must refuse (wrong attempt, wrong
 * worker, a retry beyond the budget, ExecutionRequested again), so the traversal also
 * proves refusals leave the state alone. Timestamps are fixed per event type, so repeated
 * progress reaches an already-seen state and the graph stays finite.
 */
export function pathAlphabet(): ExecutionEvent[] {
  const attempts = [1, 2];
  return [
    ev.requested({ maxAttempts: PATH_MAX_ATTEMPTS }),
    ev.schedulingStarted(),
    // An action's limit lowering the submission's (refused at attempt 2), and one above it (always refused).
    ev.schedulingStarted({ maxAttempts: 1 }),
    ev.schedulingStarted({ maxAttempts: PATH_MAX_ATTEMPTS + 1 }),
    // The same limits on a handoff straight from Requested (machine version 7), from worker a only.
    ...attempts.flatMap((n) => [1, PATH_MAX_ATTEMPTS + 1].map((maxAttempts) => ev.handedOff('a', n, { maxAttempts }))),
    ...PATH_WORKERS.flatMap((w) => [
      ...attempts.map((n) => ev.handedOff(w, n)),
      ...attempts.map((n) => ev.started(w, n)),
      ev.progressed(w),
      ev.completed(w),
      ev.failed(w, true),
      ev.failed(w, false),
      ev.cancelled(w),
      ev.timedOut(w),
      ev.released(w),
      ...attempts.map((n) => ev.reclaimed(w, n)),
    ]),
    // Tags from one worker only (from both: 1,850 paths, not 1,286); b's would add nothing new to check.
    ev.tagged('a'),
    ev.cancelled('executor'),
    ev.cancelRequested(),
    ev.retryScheduled(2),
    ev.retryScheduled(3),
    ev.abandoned(),
  ];
}

/**
 * The alphabet for a traversal of the machine, bounded: from machine version 8 a handoff that
 * comes back unstarted keeps its attempt, so handoff → return → handoff … would go on without end
 * (each adds to `owners`). A path returns an unstarted handoff that way once, on the first
 * attempt's first handoff (every later one does the same).
 */
export function oneUnstartedReturn(alphabet: readonly ExecutionEvent[]): (snapshot: ExecutionSnapshot) => ExecutionEvent[] {
  // The returns that keep the attempt (a schedule-to-start reclaim spends it, so is bounded by the attempts).
  const keepsAttempt = (e: ExecutionEvent) => e.type === 'OwnershipReleased' || (e.type === 'OwnershipReclaimed' && e.data.reason !== 'schedule-to-start');
  const noReturns = alphabet.filter((e) => !keepsAttempt(e));
  return (snapshot) => (snapshot.value === 'Scheduled' && snapshot.context.owners.length > 2 ? noReturns : [...alphabet]);
}

export interface ExecutionPath {
  /** From ExecutionRequested on: exactly what a stored stream would hold. */
  events: ExecutionEvent[];
  finalStatus: ExecutionStatus;
  finalContext: ExecutionContext;
  /** The snapshot the traversal reached (for checks against the machine's helpers). */
  finalSnapshot: ExecutionSnapshot;
}

/**
 * One shortest path from ExecutionRequested to every distinct reachable (state, context):
 * ~3,800 paths (3,762 measured) (tags that outlive retries double many states; an unstarted return doubles them again), 14 events at most. The serialized state is the whole state value plus the
 * whole context: a coarser key would merge states whose futures differ (attempt, owner,
 * retryPending) or whose contexts differ, and a path's end would then not be what folding
 * its events gives. (getSimplePaths would also work but runs one DFS per target state:
 * ~36 s here, against ~0.2 s.)
 */
export function generateExecutionPaths(): ExecutionPath[] {
  const requested = ev.requested({ maxAttempts: PATH_MAX_ATTEMPTS });
  const alphabet = pathAlphabet();
  const paths = getShortestPaths(executionMachine, {
    input: requested,
    events: oneUnstartedReturn(alphabet),
    serializeState: (snapshot) => JSON.stringify({ value: snapshot.value, context: snapshot.context }),
    serializeEvent: (event) => JSON.stringify(event),
    // States and events visited; under 400,000 today (3,762 paths in ~4 s on this 2-core machine). Fails loudly if a change makes the graph unbounded.
    limit: 400_000,
  });
  return paths.map((path) => ({
    // steps[0] is the library's synthetic xstate.init; every later step's event is ours.
    events: [requested, ...path.steps.slice(1).map((step) => step.event)],
    finalStatus: statusOf(path.state),
    finalContext: path.state.context,
    finalSnapshot: path.state,
  }));
}
