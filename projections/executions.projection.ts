// Applying the executions fold to Postgres: load the batch's rows, fold, write back the rows
// and their actions' stats. Rows are loaded once per batch and written once, whatever the
// number of events.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../schemas/events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import { countRowChange, emptyActionStats, type ActionStatsRow } from './action-stats.ts';
import { foldExecutionEvent, foldOfRow, rowOf, type ExecutionFold, type ExecutionRow } from './executions.ts';
import { isFinal } from '../actors/execution.machine.ts';
import type { BatchMemory, BatchResult, Projection } from './projection.ts';
import { fromColumns, insertNewRows, insertRows, qualified, selectRowsByKeys, snakeCase, updateChangedColumns, upsertRows } from './rows.ts';

const EXECUTION_BIGINTS = ['revision', 'run_ms', 'total_ms', 'stall_timeout_ms'];
const STATS_BIGINTS = ['requested', 'queued', 'running', 'completed', 'failed', 'cancelled', 'timed_out', 'abandoned', 'retried'];

// Column lists from the row types' keys, so a field added to the fold cannot be forgotten here.
const sampleExecution: Record<keyof ExecutionRow, true> = {
  executionId: true, revision: true, status: true, action: true, input: true, owner: true, workerId: true,
  attempt: true, maxAttempts: true, submittedMaxAttempts: true, priority: true, idempotencyKey: true, parentId: true, workflowId: true,
  pinnedVersion: true, actionVersion: true,
  result: true, error: true, retryPending: true, retryAt: true, leaseDeadline: true, lastProgressAt: true,
  lastProgress: true, stallTimeoutMs: true, requestedAt: true, scheduledAt: true, startedAt: true, finishedAt: true, updatedAt: true,
  runMs: true, totalMs: true, owners: true, cancelReason: true, cancelRequested: true, timedOutLimit: true, abandonReason: true,
  refusedEvents: true, tags: true, namespace: true,
};
export const EXECUTION_COLUMNS = Object.keys(sampleExecution).map(snakeCase);
const STATS_COLUMNS = Object.keys(emptyActionStats('x')).map(snakeCase);

export const executionRowFromDb = (r: Record<string, unknown>) => fromColumns<ExecutionRow>(r, EXECUTION_BIGINTS);
export const actionStatsFromDb = (r: Record<string, unknown>) => fromColumns<ActionStatsRow>(r, STATS_BIGINTS);

export async function loadExecutionRows(client: pg.ClientBase, schema: string, ids: readonly string[]): Promise<Map<string, ExecutionRow>> {
  if (ids.length === 0) return new Map();
  const rows = await selectRowsByKeys(client, qualified(schema, 'executions'), 'execution_id', 'uuid', ids);
  return new Map(rows.map((row) => [row['execution_id'] as string, executionRowFromDb(row)]));
}

/** An execution's row as this follow last wrote it, and the fold it was made from (see BatchMemory). */
interface Written {
  row: ExecutionRow;
  fold: ExecutionFold;
}

/**
 * Executions remembered between batches at most. An execution is forgotten once final (nothing
 * moves it on) and otherwise oldest first; one forgotten is read back like any other. The ones
 * remembered are those between their request and their end: `baton bench` submits its 20,000 in
 * ~4 s and runs ~1,500 a second, a backlog of up to ~15,000. An entry is the row (39 columns) and
 * the snapshot it was made from.
 */
const REMEMBERED = 20_000;

function remember(memory: Map<string, Written>, id: string, written: Written): void {
  memory.delete(id); // re-inserted: the Map's order is the order last written
  if (isFinal(written.fold.snapshot)) return;
  memory.set(id, written);
  if (memory.size > REMEMBERED) memory.delete(memory.keys().next().value!);
}

export const executionsProjection: Projection = {
  name: 'executions',
  // 2: stall_timeout_ms, and the index of running executions by last progress.
  // 3: cancel_requested (ExecutionCancelRequested, machine version 3).
  // 4: submitted_max_attempts (machine version 4: the limit a submission named; max_attempts follows the action's).
  // 5: tags (machine version 5), with a GIN index for filtering by them.
  // 6: pinned_version, action_version (machine version 6: versioned actions).
  // 7 (namespaces): namespace, and its index for listing one namespace.
  // 8: no index on updated_at (the drift check samples what the projector changed: drift.ts), and
  //    the tags index holds tagged executions only. Fewer index entries per write: measured in
  //    `baton bench` (30,000 executions, seven pairs), Postgres's CPU per execution −6%.
  // 9: retry_pending is false once the execution has ended (machine: a final state leaves no retry
  //    pending; an Abandoned execution after a reclaim kept true).
  version: 9,
  streamPrefixes: [EXECUTION_STREAM_PREFIX],
  tables: [
    { name: 'executions', key: ['execution_id'] },
    { name: 'action_stats', key: ['action'] },
  ],
  ddl: new URL('./executions.sql', import.meta.url),
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[], _source?: unknown, memory?: BatchMemory): Promise<BatchResult> {
    const ids = [...new Set(events.map((e) => executionIdOfStream(e.streamId)).filter((id) => id !== undefined))];
    // What this follow wrote itself is not read back (rows, then their snapshots rebuilt from the
    // columns): in `baton bench` that was most executions of every batch.
    const written = memory as Map<string, Written> | undefined;
    const stored = await loadExecutionRows(client, schema, written ? ids.filter((id) => !written.has(id)) : ids);
    for (const id of ids) {
      const w = written?.get(id);
      if (w) stored.set(id, w.row);
    }
    // Each execution's events fold on its snapshot; its row is built once, after the batch.
    const folds = new Map<string, ExecutionFold | undefined>();
    const applied = new Set<string>();
    const changed = new Set<string>();
    const refused: BatchResult['refused'] = [];
    for (const e of events) {
      const id = executionIdOfStream(e.streamId);
      if (id === undefined) continue;
      let fold = folds.get(id);
      if (fold === undefined && !folds.has(id)) {
        const row = stored.get(id);
        fold = written?.get(id)?.fold ?? (row && foldOfRow(row));
      }
      const outcome = foldExecutionEvent(fold, e);
      folds.set(id, outcome.fold);
      if (outcome.kind === 'skipped') continue;
      if (outcome.kind === 'refused') refused.push({ streamId: e.streamId, revision: e.revision, reason: outcome.reason });
      if (!outcome.fold) continue;
      changed.add(id);
      if (outcome.kind === 'applied') applied.add(id);
    }
    const rows = new Map([...changed].map((id) => [id, rowOf(folds.get(id)!)]));
    const table = qualified(schema, 'executions');
    const upsert = (r: ExecutionRow[]) => upsertRows(client, table, ['execution_id'], EXECUTION_COLUMNS, r);
    // Rows the load did not find are new: a plain INSERT (rows.ts, insertNewRows). The rest get
    // only their changed columns (the input, written once, is not sent again); one that is gone
    // after all is written whole.
    const fresh = [...rows.values()].filter((r) => !stored.has(r.executionId));
    if (fresh.length > 0) await insertNewRows(client, () => insertRows(client, table, EXECUTION_COLUMNS, fresh, ''), () => upsert(fresh));
    const existing = [...rows.values()].filter((r) => stored.has(r.executionId)).map((after) => ({ before: stored.get(after.executionId)!, after }));
    await upsert(await updateChangedColumns(client, table, 'execution_id', 'uuid', EXECUTION_COLUMNS, existing));
    // Stats count status changes and new attempts, which compose: the batch's first row to its last says as much as each step.
    await applyStats(client, schema, [...applied].map((id) => ({ before: stored.get(id), after: rows.get(id)! })));
    if (written) for (const [id, row] of rows) remember(written, id, { row, fold: folds.get(id)! });
    return { changedExecutions: [...changed], refused };
  },
};

async function applyStats(client: pg.ClientBase, schema: string, changes: { before: ExecutionRow | undefined; after: ExecutionRow }[]) {
  if (changes.length === 0) return;
  const table = qualified(schema, 'action_stats');
  const actions = [...new Set(changes.map((c) => c.after.action))];
  const rows = await selectRowsByKeys(client, table, 'action', 'text', actions);
  // Read fresh for this batch, so counted in place (countRowChange), not copied per change.
  const stats = new Map(rows.map((row) => [row['action'] as string, actionStatsFromDb(row)]));
  for (const { before, after } of changes) {
    let row = stats.get(after.action);
    if (!row) stats.set(after.action, (row = emptyActionStats(after.action)));
    countRowChange(row, before, after);
  }
  await upsertRows(client, table, ['action'], STATS_COLUMNS, [...stats.values()]);
}
