// Runs and their requests: a cancel request rings the worker holding it, a run past its
// start-to-close deadline (and a grace for the worker to say so itself) is timed out, and a work
// message that ran out of deliveries fails its execution.
import { isFinal } from '../../../actors/execution.machine.ts';
import { mapLimit } from '../../async/map-limit.ts';
import { NotFoundError, RejectedCommandError } from '../../errors.ts';
import type { DeadLetter } from '../../transport/work-transport.ts';
import type { MonitorContext } from './context.ts';
import type { RunningExecution } from '../scheduling-entries.ts';

/**
 * The reason of the ExecutionAbandoned a dead letter causes. It names the message, so whoever
 * reads the history later can tell the execution ended for this dead letter (dead-letter-standing.ts).
 */
export const deadLetterAbandonReason = (d: Pick<DeadLetter, 'workerId' | 'reason' | 'messageId'>): string =>
  `its work message for worker ${d.workerId} was dead-lettered (${d.reason}); see \`baton dlq show ${d.messageId}\``;

/** The executor's ExecutionTimedOut of a run past its recorded start-to-close deadline. */
export const timeOutRun = (c: MonitorContext, run: RunningExecution): Promise<void> =>
  c.enforce('start-to-close timeout', run.executionId, { type: 'ExecutionTimedOut', data: { limit: 'start-to-close', deadline: run.deadline! }, by: 'executor' });

/** How often a worker is rung again about the same cancel request. */
const RING_EVERY_MS = 1_000;

export function runDuties(c: MonitorContext) {
  /** executionId → when this executor last rang its worker about the cancel request. */
  const rung = new Map<string, number>();

  return {
    /**
     * Tell each worker holding an execution with a cancel request to stop it. The ring is a
     * doorbell (not durable), so it repeats until the execution leaves the worker; the worker's
     * ExecutionCancelled (or a reclaim, then our own) ends it.
     */
    async ringCancelRequests(): Promise<void> {
      const held = c.view.cancelRequestsHeld();
      const stillHeld = new Set(held.map((r) => r.executionId));
      for (const id of rung.keys()) if (!stillHeld.has(id)) rung.delete(id);
      const due = held.filter((r) => c.now() - (rung.get(r.executionId) ?? -Infinity) >= RING_EVERY_MS);
      await mapLimit(due, c.parallelism, async (r) => {
        rung.set(r.executionId, c.now());
        await c.transport.sendSignal(r.workerId, { kind: 'cancel', executionId: r.executionId, attempt: r.attempt, reason: r.reason });
        c.log.debug({ executionId: r.executionId, workerId: r.workerId }, 'asked the worker to cancel');
      });
    },

    /** Runs past their start-to-close deadline (plus a grace for the worker to say so itself). */
    async timeOutOverdue(): Promise<void> {
      await mapLimit(c.view.overdueRuns(c.now(), c.timeoutGraceMs), c.parallelism, (r) => timeOutRun(c, r));
    },

    /**
     * A work message that ran out of deliveries: fail its execution, clearly, if that worker
     * still holds that attempt. Anything else (it finished meanwhile, was reclaimed, a late ack
     * raced the move) means there is nothing to fail; a dead letter seen twice is harmless.
     */
    async onDeadLetter(d: DeadLetter): Promise<void> {
      const { executionId, attempt } = d.message;
      try {
        // One append: reclaim and abandon together, so no retry is scheduled in between.
        const r = await c.runtime.dispatch(executionId, (s) =>
          isFinal(s!) || s!.context.owner !== `worker:${d.workerId}` || s!.context.attempt !== attempt
            ? undefined
            : [
                { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: d.workerId, attempt }, by: 'executor' },
                { type: 'ExecutionAbandoned', data: { reason: deadLetterAbandonReason(d) }, by: 'executor' },
              ],
        );
        if (!r.appended) return;
        c.metrics?.enforced.inc({ kind: 'dead letter' });
        c.log.warn({ executionId, workerId: d.workerId, messageId: d.messageId }, 'execution abandoned: its work message was dead-lettered');
      } catch (err) {
        if (err instanceof NotFoundError || err instanceof RejectedCommandError) return;
        throw err; // thrown: the transport hands it over again
      }
    },
  };
}
