// `baton bench replay`: how fast `baton replay --all` checks a store. Appends N complete
// execution histories (completedHistory) to a scratch database, then replays them all against the
// current machine and against the recorded versions.
import type pg from 'pg';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { table } from '../cli/format.ts';
import { CURRENT_MACHINE, RECORDED_MACHINES, describeTarget } from '../replay/replay.ts';
import { replayStore } from '../replay/replay-store.ts';
import { appendHistories, COMPLETED_HISTORY_EVENTS } from './projections.ts';
import { withScratchDatabase } from './scratch-database.ts';

export interface ReplayBenchResult {
  postgres: string;
  executions: number;
  runs: { against: string; events: number; seconds: number; eventsPerSec: number; divergences: number }[];
}

export async function runReplayBench(admin: { pool: pg.Pool; databaseUrl: string }, o: { executions: number; progress: (line: string) => void }): Promise<ReplayBenchResult> {
  return withScratchDatabase(admin, 16, async ({ pool, postgresVersion }) => {
    const store = createPostgresEventStore(pool);
    try {
      o.progress(`[1/2] appending ${o.executions.toLocaleString('en')} execution histories (${COMPLETED_HISTORY_EVENTS} events each) …`);
      await appendHistories(store, o.executions);
      o.progress('[2/2] replaying every stream …');
      const runs: ReplayBenchResult['runs'] = [];
      for (const target of [CURRENT_MACHINE, RECORDED_MACHINES]) {
        const s = await replayStore({ store, target });
        runs.push({ against: describeTarget(target), events: s.events, seconds: Number((s.ms / 1000).toFixed(2)), eventsPerSec: Math.round(s.events / (s.ms / 1000)), divergences: s.divergences.length });
      }
      return { postgres: postgresVersion, executions: o.executions, runs };
    } finally {
      await store.close();
    }
  });
}

export function printReplayBench(r: ReplayBenchResult): string {
  return [
    `replay --all over ${r.executions.toLocaleString('en')} executions (PostgreSQL ${r.postgres}), reading from the store included`,
    table(['AGAINST', 'EVENTS', 'SECONDS', 'EVENTS/S', 'DIVERGENCES'], r.runs.map((x) => [x.against, x.events.toLocaleString('en'), String(x.seconds), x.eventsPerSec.toLocaleString('en'), String(x.divergences)])),
  ].join('\n');
}
