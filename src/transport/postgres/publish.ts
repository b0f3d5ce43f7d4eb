// Publishing to the Postgres work queue: one INSERT for the whole batch (a message already queued
// is left as it is: idempotent per messageId) that also NOTIFYs the consumers of other processes;
// those of this one are woken directly once it committed.
import { validateForPublish } from '../internal.ts';
import type { WorkMessage } from '../work-transport.ts';
import type { PostgresContext } from './context.ts';
import { PUBLISH_SQL } from './queue-sql.ts';

export function createPublish({ pool, wakeups, assertOpen }: PostgresContext): (messages: WorkMessage[]) => Promise<void> {
  return async function publish(messages: WorkMessage[]): Promise<void> {
    assertOpen('publish');
    validateForPublish(messages);
    if (messages.length === 0) return;
    await pool.query({
      name: 'baton_work_publish',
      text: PUBLISH_SQL,
      values: [
        messages.map((m) => m.messageId),
        messages.map((m) => m.workerId),
        messages.map((m) => m.runtime),
        JSON.stringify(messages),
        wakeups.channel,
        wakeups.payload,
      ],
    });
    wakeups.wake();
  };
}
