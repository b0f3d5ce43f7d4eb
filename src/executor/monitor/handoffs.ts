// Handoffs not started yet: re-published meanwhile (NATS is a doorbell, not a record), and
// reclaimed once their schedule-to-start deadline passed.
import { mapLimit } from '../../async/map-limit.ts';
import { publishFailureFields, workMessage } from '../work-messages.ts';
import type { MonitorContext } from './context.ts';

export function handoffDuties(c: MonitorContext) {
  /** handoff event id → when this executor last published it and how many times. */
  const published = new Map<string, { at: number; times: number }>();

  return {
    /**
     * Re-publish handoffs not started yet: after republishAfterMs, then with doubling gaps. The
     * message id is the handoff's event id, so a message the broker still holds is deduplicated;
     * one it lost (restart, wiped store, a crash between append and publish) is delivered again.
     */
    async republish(): Promise<void> {
      const now = c.now();
      const due = c.view.handedOff().filter((h) => {
        const last = published.get(h.handoffEventId);
        const since = last ? now - last.at : now - h.handedOffAt;
        return since >= c.republishAfterMs * 2 ** Math.min(4, (last?.times ?? 1) - 1);
      });
      if (due.length === 0) return;
      // The state travels only if the cache still holds it at the handoff's revision.
      const stateAt = (h: (typeof due)[number]) => {
        const held = c.runtime.cached(h.executionId);
        return held?.revision === h.handoffRevision ? held.snapshot : undefined;
      };
      const messages = due.map((h) => workMessage(h, c.runtimeOf(h.action), now, stateAt(h)));
      try {
        await c.transport.publish(messages);
      } catch (err) {
        // Logged here, not by the monitor's tick, to name the executions still unpublished.
        c.log.error({ err, ...publishFailureFields(err, messages) }, 'monitor: re-publishing handoffs failed; will try again');
        return;
      }
      for (const h of due) published.set(h.handoffEventId, { at: now, times: (published.get(h.handoffEventId)?.times ?? 0) + 1 });
      c.log.info({ count: due.length, executionIds: due.slice(0, 10).map((h) => h.executionId) }, 're-published handoffs not started yet');
    },

    async reclaimExpired(): Promise<void> {
      await mapLimit(c.view.expiredHandoffs(c.now()), c.parallelism, (h) =>
        c.enforce('schedule-to-start reclaim', h.executionId, { type: 'OwnershipReclaimed', data: { reason: 'schedule-to-start', workerId: h.workerId, attempt: h.attempt }, by: 'executor' }),
      );
    },

    /** This executor published these handoffs just now: re-publish them only after republishAfterMs. */
    published(messageIds: readonly string[]): void {
      for (const id of messageIds) published.set(id, { at: c.now(), times: 1 });
    },

    /** The handoff was started or settled: nothing to re-publish. */
    gone(handoffEventId: string): void {
      published.delete(handoffEventId);
    },
  };
}
