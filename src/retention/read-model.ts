// Taking archived executions out of the live read model so that it stays exactly what a rebuild
// from the remaining events gives (`baton projections verify` passes after retention): their
// `executions` and `execution_events` rows go, and what they added to the aggregates is taken
// back out. The amounts come from the projections' own pure folds run over the archived events
// (what a rebuild would have added for them), never from a second hand-kept copy of the rules:
// `action_stats` counters and histogram buckets, and the outcome counters of `workers`. A row
// a rebuild would no longer create (an action nobody requested any more, a worker known only
// from archived executions' events) is deleted.
import type pg from 'pg';
import { READ_MODEL_SCHEMA } from '../../projections/index.ts';
import { applyRowChange, emptyActionStats, type ActionStatsRow, type Counters } from '../../projections/action-stats.ts';
import { foldExecutionRow, type ExecutionRow } from '../../projections/executions.ts';
import { actionStatsFromDb } from '../../projections/executions.projection.ts';
import { qualified, snakeCase, upsertRows } from '../../projections/rows.ts';
import { emptyWorker, foldWorkerRow, workerIdOfEvent, workerRowFromDb, type WorkerRow } from '../../projections/workers.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';

const COUNTERS: (keyof Counters)[] = ['requested', 'queued', 'running', 'completed', 'failed', 'cancelled', 'timedOut', 'abandoned', 'retried'];
const WORKER_COUNTERS = ['started', 'completed', 'failed', 'timedOut', 'cancelled', 'released'] as const;
const STATS_COLUMNS = Object.keys(emptyActionStats('x')).map(snakeCase);
const WORKER_COLUMNS = Object.keys(emptyWorker('x')).map(snakeCase);

/** What these executions' events added to each action's stats and each worker's counters. */
export function contributions(histories: readonly (readonly StoredEvent[])[]): { stats: Map<string, ActionStatsRow>; workers: Map<string, WorkerRow> } {
  const stats = new Map<string, ActionStatsRow>();
  const workers = new Map<string, WorkerRow>();
  for (const events of histories) {
    let row: ExecutionRow | undefined;
    for (const e of events) {
      const outcome = foldExecutionRow(row, e);
      if (outcome.kind === 'applied' && outcome.row) {
        const action = outcome.row.action;
        stats.set(action, applyRowChange(stats.get(action) ?? emptyActionStats(action), row, outcome.row));
      }
      if (outcome.row) row = outcome.row;
      const workerId = workerIdOfEvent(e);
      if (workerId !== undefined) {
        const next = foldWorkerRow(workers.get(workerId), e);
        if (next) workers.set(workerId, next);
      }
    }
  }
  return { stats, workers };
}

function subtractStats(live: ActionStatsRow, gone: ActionStatsRow): ActionStatsRow {
  const next: ActionStatsRow = { ...live, durationHistogram: { ...live.durationHistogram } };
  for (const c of COUNTERS) next[c] = live[c] - gone[c];
  for (const [bucket, n] of Object.entries(gone.durationHistogram)) {
    const left = (next.durationHistogram[bucket] ?? 0) - n;
    if (left > 0) next.durationHistogram[bucket] = left;
    else delete next.durationHistogram[bucket];
  }
  return next;
}

/**
 * Remove these executions (id → its whole stored history) from the live read model, inside the
 * caller's transaction. The projector must have applied every one of their events (the caller
 * checks), or a counter would be taken back that was never added.
 */
export async function removeFromReadModel(client: pg.ClientBase, histories: ReadonlyMap<string, readonly StoredEvent[]>, schema = READ_MODEL_SCHEMA): Promise<void> {
  if (histories.size === 0) return;
  // The projector's batches read the aggregates and write them back whole, having first moved
  // their checkpoints (group-follow.ts): holding the checkpoints, this waits for a batch in
  // flight and holds the next one back until it commits, so neither overwrites the other's
  // counts (QA: retention under load left action_stats and the workers' counters off, and deadlocked).
  await client.query('SELECT projection FROM baton_projection_checkpoints ORDER BY projection FOR UPDATE');
  const ids = [...histories.keys()];
  await client.query(`DELETE FROM ${qualified(schema, 'executions')} WHERE execution_id = ANY($1::uuid[])`, [ids]);
  // A view of the events where they share this database (tables.ts): the delete does nothing there,
  // and the events go with their stream.
  await client.query(`DELETE FROM ${qualified(schema, 'execution_events')} WHERE execution_id = ANY($1::uuid[])`, [ids]);
  const { stats, workers } = contributions([...histories.values()]);

  const statsTable = qualified(schema, 'action_stats');
  const liveStats = await client.query(`SELECT * FROM ${statsTable} WHERE action = ANY($1::text[]) ORDER BY action FOR UPDATE`, [[...stats.keys()]]);
  const keepStats: ActionStatsRow[] = [];
  const dropStats: string[] = [];
  for (const dbRow of liveStats.rows) {
    const live = actionStatsFromDb(dbRow);
    const next = subtractStats(live, stats.get(live.action)!);
    // No execution of this action is left to be requested: a rebuild would have no row.
    if (next.requested <= 0) dropStats.push(live.action);
    else keepStats.push(next);
  }
  await upsertRows(client, statsTable, ['action'], STATS_COLUMNS, keepStats);
  if (dropStats.length > 0) await client.query(`DELETE FROM ${statsTable} WHERE action = ANY($1::text[])`, [dropStats]);

  const workersTable = qualified(schema, 'workers');
  const liveWorkers = await client.query(`SELECT * FROM ${workersTable} WHERE worker_id = ANY($1::text[]) ORDER BY worker_id FOR UPDATE`, [[...workers.keys()]]);
  const keepWorkers: WorkerRow[] = [];
  const dropWorkers: string[] = [];
  for (const dbRow of liveWorkers.rows) {
    const live = workerRowFromDb(dbRow);
    const gone = workers.get(live.workerId)!;
    const next: WorkerRow = { ...live };
    for (const c of WORKER_COUNTERS) next[c] = live[c] - gone[c];
    // Known only from execution events, and none of them is left: a rebuild would have no row.
    if (next.revision < 0 && WORKER_COUNTERS.every((c) => next[c] <= 0)) dropWorkers.push(live.workerId);
    else keepWorkers.push(next);
  }
  await upsertRows(client, workersTable, ['worker_id'], WORKER_COLUMNS, keepWorkers);
  if (dropWorkers.length > 0) await client.query(`DELETE FROM ${workersTable} WHERE worker_id = ANY($1::text[])`, [dropWorkers]);
}
