// The work message for a handoff: what the transport carries to the worker. It names the
// handoff's event id (the message id, so a broker that still holds it deduplicates a
// re-publish) and the revision the handoff left the stream at (the worker's ExecutionStarted
// must be appended there, or it is no longer the owner), and the execution's state there, so
// the worker need not read it back (carried-execution.ts).
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { carryExecution } from '../runtime/carried-execution.ts';
import { WorkPublishError } from '../transport/publish-error.ts';
import type { WorkMessage } from '../transport/work-transport.ts';
import type { HandedOffExecution } from './scheduling-entries.ts';

export type Handoff = Pick<HandedOffExecution, 'handoffEventId' | 'executionId' | 'workerId' | 'action' | 'attempt' | 'handoffRevision'>;

/** `runtime`: the runtime tag the action's workers advertise, the work subject's `<runtime>` token. */
export function workMessage(h: Handoff, runtime: string, now: number, state?: ExecutionSnapshot): WorkMessage {
  const execution = state && carryExecution(state);
  return {
    messageId: h.handoffEventId,
    executionId: h.executionId,
    workerId: h.workerId,
    runtime,
    action: h.action,
    attempt: h.attempt,
    handoffRevision: String(h.handoffRevision),
    publishedAt: new Date(now).toISOString(),
    ...(execution && { execution }),
  };
}

/**
 * Log fields for a failed publish of `messages`: the execution and attempt the failed message
 * carries (the one the transport names, or the only one), and the batch's first executions,
 * since one failure may leave the rest of the batch unpublished too.
 */
export function publishFailureFields(err: unknown, messages: readonly WorkMessage[]) {
  const failed: Pick<WorkMessage, 'messageId' | 'executionId' | 'attempt' | 'workerId'> | undefined =
    err instanceof WorkPublishError ? err : messages.length === 1 ? messages[0] : undefined;
  return {
    count: messages.length,
    ...(failed && { executionId: failed.executionId, attempt: failed.attempt, messageId: failed.messageId, workerId: failed.workerId }),
    executions: messages.slice(0, 10).map((m) => ({ executionId: m.executionId, attempt: m.attempt })),
  };
}
