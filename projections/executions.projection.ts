// Applying the executions fold to Postgres: load the batch's rows, fold, write back the rows
// and their actions' stats. Rows are loaded once per batch and written once, whatever the
// number of events.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream } from '../schemas/events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import { foldExecutionEvent, foldOfRow, rowOf, type ExecutionFold, type ExecutionRow } from './executions.ts';
import { isFinal } from '../actors/execution.machine.ts';
import type { BatchMemory, BatchResult, Projection } from './projection.ts';
import { loadExecutionRows, lockExecutionRows, storedRevisions, writeRowChanges } from './execution-row-writes.ts';

export { EXECUTION_COLUMNS, actionStatsFromDb, executionRowFromDb, loadExecutionRows } from './execution-row-writes.ts';

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
  version: 8,
  streamPrefixes: [EXECUTION_STREAM_PREFIX],
  tables: [
    { name: 'executions', key: ['execution_id'] },
    { name: 'action_stats', key: ['action'] },
  ],
  ddl: new URL('./executions.sql', import.meta.url),
  apply: (client, schema, events, _source, memory) => foldAndWrite(client, schema, events, { memory }),
};

/**
 * Fold the batch's events of each execution on its stored row and write the rows that changed.
 * `memory`: the follow's BatchMemory (see Written). `shared`: other writers write rows too
 * (appenders mode): the caller holds the rows' locks, and the stats are locked as they are counted.
 */
async function foldAndWrite(client: pg.ClientBase, schema: string, events: readonly StoredEvent[], o: { memory?: BatchMemory; shared?: boolean }): Promise<BatchResult> {
  const ids = [...new Set(events.map((e) => executionIdOfStream(e.streamId)).filter((id) => id !== undefined))];
  // What this follow wrote itself is not read back (rows, then their snapshots rebuilt from the
  // columns): in `baton bench` that was most executions of every batch.
  const written = o.memory as Map<string, Written> | undefined;
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
  const changes = [...rows.values()].map((after) => ({ before: stored.get(after.executionId), after, counts: applied.has(after.executionId) }));
  await writeRowChanges(client, schema, changes, { shared: o.shared ?? false });
  if (written) for (const [id, row] of rows) remember(written, id, { row, fold: folds.get(id)! });
  return { changedExecutions: [...changed], refused };
}

/**
 * How long after an event is recorded the repair pass may look at its row (holdBackMs): the
 * appender writes it within its flush interval (src/readmodel/appended-rows.ts, 100 ms apart at
 * most under load, 10 ms after a quiet spell) plus the flush itself; a row still behind after
 * this is one a process did not write (it crashed, or it appends without a row writer).
 */
export const REPAIR_HOLD_BACK_MS = 500;

/**
 * The `executions` projection when the appenders write the rows (BATON_EXECUTION_ROWS=appenders):
 * the same tables, version and checkpoint, but a batch only checks each execution's stored
 * revision against its last event's, and folds and writes just the rows left behind, under the
 * appenders' row locks. So the checkpoint still means every row has caught up to it (hosts start
 * from it: src/runtime/start-point.ts); rows may be further on.
 */
export const executionsRepairProjection: Projection = {
  ...executionsProjection,
  holdBackMs: REPAIR_HOLD_BACK_MS,
  async apply(client, schema, events) {
    const last = new Map<string, number>();
    for (const e of events) {
      const id = executionIdOfStream(e.streamId);
      if (id !== undefined) last.set(id, Number(e.revision));
    }
    const revisions = await storedRevisions(client, schema, [...last.keys()]);
    const behind = new Set([...last].filter(([id, revision]) => (revisions.get(id) ?? -1) < revision).map(([id]) => id));
    if (behind.size === 0) return { changedExecutions: [], refused: [] };
    await lockExecutionRows(client, schema, [...behind]);
    // Read again under the locks (foldAndWrite): an appender may have written some meanwhile.
    return foldAndWrite(client, schema, events.filter((e) => behind.has(executionIdOfStream(e.streamId)!)), { shared: true });
  },
};
