// TEMPORARY stand-in for src/runtime/cancel.ts (being written on main): the same signature, but
// it only ends executions the executor still holds (before the handoff). Deleted when main is
// merged; nothing but the workflow code imports it.
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { RejectedCommandError } from '../errors.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';

export interface CancelResult {
  executionId: string;
  outcome: 'cancelled' | 'cancel-requested' | 'already-requested' | 'too-late';
  status: string;
  message: string;
}

export async function cancelExecution(runtime: ExecutionRuntime, executionId: string, reason: string): Promise<CancelResult> {
  for (let attempt = 1; ; attempt++) {
    const loaded = await runtime.load(executionId);
    const status = statusOf(loaded.snapshot);
    if (isFinal(loaded.snapshot)) return { executionId, outcome: 'too-late', status, message: `execution ${executionId} is already ${status}` };
    if (loaded.snapshot.context.owner !== 'executor') {
      return { executionId, outcome: 'cancel-requested', status, message: `execution ${executionId} is held by a worker; (stub) cancellation after the handoff is not available yet` };
    }
    try {
      const r = await runtime.dispatch(executionId, { type: 'ExecutionCancelled', by: 'executor', data: { reason } }, { known: loaded });
      return { executionId, outcome: 'cancelled', status: statusOf(r.snapshot), message: `execution ${executionId} cancelled` };
    } catch (err) {
      if (err instanceof RejectedCommandError && attempt < 3) continue; // handed off or finished meanwhile: look again
      throw err;
    }
  }
}
