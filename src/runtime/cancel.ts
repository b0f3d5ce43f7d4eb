// Cancelling an execution in whatever state it is in. While the executor holds the baton
// (Requested, Scheduling) the cancel is a transition the executor appends. Once a worker holds
// it (Scheduled, Running) only the worker may end it, so the cancel is recorded as a request
// (ExecutionCancelRequested): the executor rings the worker, whose run is aborted and which
// appends ExecutionCancelled; if the worker is gone, the baton comes back to the executor
// through a reclaim and the executor ends it as Cancelled instead of retrying. A finished
// execution cannot be cancelled, and the result says so rather than throwing.
import { EXECUTOR, isFinal, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { RejectedCommandError } from '../errors.ts';
import type { ExecutionRuntime } from './execution-runtime.ts';

export interface CancelResult {
  executionId: string;
  /**
   * cancelled: it is Cancelled now (the executor held it). cancel-requested: a worker holds it
   * and was asked to stop; it ends as Cancelled unless it finishes first. already-requested: an
   * earlier request is still in progress. too-late: it had already finished.
   */
  outcome: 'cancelled' | 'cancel-requested' | 'already-requested' | 'too-late';
  /** Its state after this call. */
  status: string;
  /** One sentence for people: what happened and what happens next. */
  message: string;
}

/** How often the state may move under us (handoff, finish) before we give up deciding. */
const MAX_RACES = 5;

export async function cancelExecution(runtime: ExecutionRuntime, executionId: string, reason: string): Promise<CancelResult> {
  for (let race = 1; ; race++) {
    const loaded = await runtime.load(executionId); // NotFoundError when there is no such execution
    const settled = alreadySettled(executionId, loaded.snapshot);
    if (settled) return settled;
    const { owner, workerId } = loaded.snapshot.context;
    try {
      if (owner === EXECUTOR) {
        const r = await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason }, by: EXECUTOR }, { known: loaded });
        return { executionId, outcome: 'cancelled', status: statusOf(r.snapshot), message: `execution ${executionId} cancelled ${whileExecutorHeld(loaded.snapshot)}` };
      }
      const r = await runtime.dispatch(executionId, { type: 'ExecutionCancelRequested', data: { reason }, by: EXECUTOR }, { known: loaded });
      return {
        executionId,
        outcome: 'cancel-requested',
        status: statusOf(r.snapshot),
        message:
          `execution ${executionId} is ${statusOf(r.snapshot)} on worker ${workerId}: cancel requested; the worker stops it and records ` +
          'ExecutionCancelled (if that worker is lost, the executor ends it as Cancelled when it reclaims it)',
      };
    } catch (err) {
      // Handed off, finished or cancelled between our read and the append: look again.
      if (!(err instanceof RejectedCommandError) || race >= MAX_RACES) throw err;
    }
  }
}

/** When the executor held it: before any worker did, or between attempts (a retry's backoff, a reclaim). */
function whileExecutorHeld(snapshot: ExecutionSnapshot): string {
  const held = snapshot.context.owners.filter((o) => o !== EXECUTOR).length;
  return held === 0 ? 'before any worker ran it' : `between attempts, while the executor held it (workers had held it ${held === 1 ? 'once' : `${held} times`})`;
}

function alreadySettled(executionId: string, snapshot: ExecutionSnapshot): CancelResult | undefined {
  const status = statusOf(snapshot);
  if (isFinal(snapshot)) {
    return {
      executionId,
      outcome: 'too-late',
      status,
      message: status === 'Cancelled' ? `execution ${executionId} is already Cancelled` : `too late: execution ${executionId} already finished as ${status}`,
    };
  }
  const { cancelRequested, workerId } = snapshot.context;
  if (cancelRequested === undefined) return undefined;
  return {
    executionId,
    outcome: 'already-requested',
    status,
    message: `a cancel of execution ${executionId} was already requested (${cancelRequested}); ${workerId ? `worker ${workerId}` : 'the executor'} is ending it`,
  };
}
