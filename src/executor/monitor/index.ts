// The executor's monitor: every deadline and every absence the history and the liveness table
// show is enforced by an ordinary compare-and-swap append, so several executors doing it at
// once is harmless (the loser finds the state moved on). Its duties, each in its own module:
// handoffs (re-publish, schedule-to-start reclaims), runs (cancel rings, start-to-close
// timeouts, dead letters) and workers (lost workers, restarted ones, actions nobody offers).
import { handoffDuties } from './handoffs.ts';
import { monitorContext, type MonitorOptions } from './context.ts';
import { runDuties } from './runs.ts';
import { workerDuties } from './workers.ts';
import type { LiveWorker } from '../worker-directory.ts';

export type { MonitorOptions } from './context.ts';
export type Monitor = ReturnType<typeof createMonitor>;

export function createMonitor(o: MonitorOptions) {
  const c = monitorContext(o);
  const handoffs = handoffDuties(c);
  const runs = runDuties(c);
  const workers = workerDuties(c);
  /** When this executor last started reaching the database without a break (see workers.reclaimFromLost). */
  let connectedSince: number | undefined;

  /** One pass of every check; a failing check is logged and tried again next time. */
  async function tick(): Promise<void> {
    const run = async (name: string, step: () => Promise<void>) => {
      try {
        await step();
      } catch (err) {
        o.log.error({ err }, `monitor: ${name} failed; will try again`);
      }
    };
    await run('re-publishing handoffs', handoffs.republish);
    await run('ringing cancel requests', runs.ringCancelRequests);
    await run('reclaiming expired handoffs', handoffs.reclaimExpired);
    let live: LiveWorker[] | undefined;
    await run('listing workers', async () => {
      try {
        live = await o.workers.list();
        connectedSince ??= o.now();
      } catch (err) {
        connectedSince = undefined;
        throw err;
      }
    });
    if (live && connectedSince !== undefined) {
      const [listed, since] = [live, connectedSince];
      await run('detecting lost workers', () => workers.reclaimFromLost(listed, since));
      await run('reclaiming from stopped workers', () => workers.reclaimFromStopped(listed));
      await run('abandoning executions no worker offers', () => workers.abandonUnoffered(listed));
    }
    await run('timing out overdue runs', runs.timeOutOverdue);
  }

  return {
    tick,
    ringCancelRequests: runs.ringCancelRequests,
    reclaimOrphans: workers.reclaimOrphans,
    onDeadLetter: runs.onDeadLetter,
    published: handoffs.published,
    handoffGone: handoffs.gone,
    unoffered: workers.unoffered,
  };
}
