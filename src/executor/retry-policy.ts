// What the executor writes when the baton comes back (a failure, a release, a reclaim), and how
// many attempts an execution gets. Pure: the decision and the action's advertised policy in,
// the command out.
import type { ExecutionContext } from '../../actors/execution.machine.ts';
import { DEFAULT_BACKOFF } from '../actions/action.ts';
import { backoffDelayMs, type ActionPolicy } from '../../schemas/worker-events.ts';
import type { ExecutionCommand } from '../runtime/execution-runtime.ts';
import type { RetryDecision } from './scheduling-entries.ts';
import type { Logger } from 'pino';

export interface RetryBackoffDefaults {
  initialMs: number;
  multiplier: number;
  maxMs: number;
}

/** Backoff between attempts of an action that advertises none (DEFAULT_BACKOFF: 1 s, doubling, at most 60 s). */
export const DEFAULT_RETRY_BACKOFF: Readonly<RetryBackoffDefaults> = Object.freeze({ initialMs: DEFAULT_BACKOFF.initialIntervalMs, multiplier: DEFAULT_BACKOFF.multiplier, maxMs: DEFAULT_BACKOFF.maxIntervalMs });

/**
 * The attempt limit to record when scheduling: the action's advertised retry.maxAttempts,
 * capped by a limit the submission named; the current limit when the action sets none. Never
 * below the attempt being scheduled (the machine refuses that).
 */
export function attemptLimit(c: ExecutionContext, policy: ActionPolicy | undefined): number {
  const own = policy?.retry?.maxAttempts;
  const limit = own === undefined ? c.maxAttempts : Math.min(own, c.submittedMaxAttempts ?? own);
  return Math.max(limit, c.attempt);
}

/** Delay before the attempt after `attempt`: the action's advertised backoff, else the default; never past MAX_RETRY_INTERVAL_MS. */
export function retryDelay(policy: ActionPolicy | undefined, attempt: number, defaults: RetryBackoffDefaults = DEFAULT_RETRY_BACKOFF): number {
  const p = policy?.retry;
  const [initialMs, multiplier, maxMs] = p ? [p.initialIntervalMs, p.multiplier, p.maxIntervalMs] : [defaults.initialMs, defaults.multiplier, defaults.maxMs];
  return backoffDelayMs(initialMs, multiplier, maxMs, attempt);
}

/** The command that answers a returned baton: cancel (a cancel was requested), retry, or give up. */
export function retryCommand(d: RetryDecision, policy: ActionPolicy | undefined, now: number, defaults: RetryBackoffDefaults = DEFAULT_RETRY_BACKOFF): ExecutionCommand {
  // Someone asked to cancel while a worker held it; the baton came back instead: end it.
  if (d.cancelRequested !== undefined) return { type: 'ExecutionCancelled', data: { reason: d.cancelRequested }, by: 'executor' };
  // The limit the history recorded when this attempt was scheduled. An execution scheduled before
  // machine version 4 recorded none: then the action's budget caps the request's, as it did.
  const maxAttempts = d.limitRecorded ? d.maxAttempts : Math.min(d.maxAttempts, policy?.retry?.maxAttempts ?? Infinity);
  if (d.attempt < maxAttempts) {
    return {
      type: 'ExecutionRetryScheduled',
      data: { attempt: d.attempt + 1, retryAt: new Date(now + retryDelay(policy, d.attempt, defaults)).toISOString(), reason: d.reason },
      by: 'executor',
    };
  }
  return { type: 'ExecutionAbandoned', data: { reason: `gave up after ${d.attempt} of ${maxAttempts} attempts; last: ${d.reason}` }, by: 'executor' };
}

/**
 * The command for each retry decision. One execution's failing decision (a bug, a malformed
 * stored policy) must not stop the others' decisions, nor the scheduling pass after them: it is
 * logged and left for the next pass.
 */
export function retryCommands(
  pending: readonly RetryDecision[],
  policyOf: (action: string) => ActionPolicy | undefined,
  now: number,
  defaults: RetryBackoffDefaults,
  log: Pick<Logger, 'error'>,
): { d: RetryDecision; commands: ExecutionCommand }[] {
  return pending.flatMap((d) => {
    try {
      return [{ d, commands: retryCommand(d, policyOf(d.action), now, defaults) }];
    } catch (err) {
      log.error({ err, executionId: d.executionId, action: d.action }, `could not decide the retry of execution ${d.executionId}; will try again`);
      return [];
    }
  });
}
