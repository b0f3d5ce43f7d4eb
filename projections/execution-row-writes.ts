// Writing `executions` rows and their actions' stats, for whoever writes them: the projector's
// fold (executions.projection.ts) and, with BATON_EXECUTION_ROWS=appenders, the processes that
// appended the events, from their own snapshots (src/readmodel/appended-rows.ts). One code path,
// so a row and its stats come out the same whoever wrote them.
//
// Several writers of one row (appenders mode): each takes a transaction advisory lock per
// execution, in id order, before it reads the row it writes over, so the row it reads is the row
// it replaces and the stats it counts from it are counted once. A row never goes back: a writer
// skips every row whose stored revision is at or past its own.
import type pg from 'pg';
import { countRowChange, emptyActionStats, type ActionStatsRow } from './action-stats.ts';
import type { ExecutionRow } from './executions.ts';
import { fromColumns, insertNewRows, insertRows, insertRowsIgnoringDuplicates, qualified, selectRowsByKeys, snakeCase, updateChangedColumns, upsertRows } from './rows.ts';

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

/** The stored revision of each of `ids` that has a row (the repair pass's check: no row is read whole). */
export async function storedRevisions(client: pg.ClientBase, schema: string, ids: readonly string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const r = await client.query<{ execution_id: string; revision: string }>(
    `SELECT t.execution_id, t.revision FROM unnest($1::uuid[]) AS k(key)
       CROSS JOIN LATERAL (SELECT execution_id, revision FROM ${qualified(schema, 'executions')} WHERE execution_id = k.key OFFSET 0) t`,
    [ids],
  );
  return new Map(r.rows.map((row) => [row.execution_id, Number(row.revision)]));
}

/**
 * Take the row locks of `ids` for this transaction (appenders mode, see the top): one advisory lock
 * per execution, keyed by the schema and the id (a hash collision only makes two writers wait for
 * each other), in id order, so two writers of overlapping sets never deadlock.
 */
export async function lockExecutionRows(client: pg.ClientBase, schema: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await client.query(`SELECT count(pg_advisory_xact_lock(hashtext($1), hashtext(id))) FROM unnest($2::text[]) AS id`, [`${schema}.executions`, [...ids].sort()]);
}

/** A row as it was (undefined: the execution is new to the table) and as it is now; `counts`: it changes the action's stats. */
export interface RowChange {
  before: ExecutionRow | undefined;
  after: ExecutionRow;
  counts: boolean;
}

/**
 * Write `changes` and count them into their actions' stats, inside the caller's transaction.
 * `shared`: other writers may update the same stats at once (appenders mode), so their rows are
 * made first if missing and then locked, as an unlocked read-and-write back would lose counts.
 */
export async function writeRowChanges(client: pg.ClientBase, schema: string, changes: readonly RowChange[], o: { shared?: boolean } = {}): Promise<void> {
  const table = qualified(schema, 'executions');
  const upsert = (r: ExecutionRow[]) => upsertRows(client, table, ['execution_id'], EXECUTION_COLUMNS, r);
  // Rows not there before are new: a plain INSERT (rows.ts, insertNewRows). The rest get only
  // their changed columns (the input, written once, is not sent again); one that is gone after all
  // is written whole.
  const fresh = changes.filter((c) => c.before === undefined).map((c) => c.after);
  if (fresh.length > 0) await insertNewRows(client, () => insertRows(client, table, EXECUTION_COLUMNS, fresh, ''), () => upsert(fresh));
  const existing = changes.filter((c): c is RowChange & { before: ExecutionRow } => c.before !== undefined);
  await upsert(await updateChangedColumns(client, table, 'execution_id', 'uuid', EXECUTION_COLUMNS, existing));
  // Stats count status changes and new attempts, which compose: a row's first state to its last says as much as each step.
  await applyStats(client, schema, changes.filter((c) => c.counts), o.shared ?? false);
}

/**
 * Rows an appender built from its own snapshots (appenders mode): each written, under its row lock,
 * over the row stored now, unless that one is at or past it already. The refused events a row
 * counts are the projector's (an appender's own events are decided by the machine, never refused),
 * so they are kept. Returns the ids written.
 */
export async function writeAppendedRows(client: pg.ClientBase, schema: string, rows: readonly ExecutionRow[]): Promise<string[]> {
  const ids = rows.map((r) => r.executionId);
  await lockExecutionRows(client, schema, ids);
  const revisions = await storedRevisions(client, schema, ids);
  const newer = rows.filter((r) => (revisions.get(r.executionId) ?? -1) < r.revision);
  const stored = await loadExecutionRows(client, schema, newer.filter((r) => revisions.has(r.executionId)).map((r) => r.executionId));
  const changes = newer.map((after): RowChange => {
    const before = stored.get(after.executionId);
    return { before, after: before ? { ...after, refusedEvents: before.refusedEvents } : after, counts: true };
  });
  await writeRowChanges(client, schema, changes, { shared: true });
  return newer.map((r) => r.executionId);
}

async function applyStats(client: pg.ClientBase, schema: string, changes: readonly RowChange[], shared: boolean) {
  if (changes.length === 0) return;
  const table = qualified(schema, 'action_stats');
  // In name order: shared, two writers of the same actions lock their rows in one order.
  const actions = [...new Set(changes.map((c) => c.after.action))].sort();
  if (shared) await insertRowsIgnoringDuplicates(client, table, STATS_COLUMNS, actions.map(emptyActionStats));
  const rows = await selectRowsByKeys(client, table, 'action', 'text', actions, { forUpdate: shared });
  // Read fresh for this batch, so counted in place (countRowChange), not copied per change.
  const stats = new Map(rows.map((row) => [row['action'] as string, actionStatsFromDb(row)]));
  for (const { before, after } of changes) {
    let row = stats.get(after.action);
    if (!row) stats.set(after.action, (row = emptyActionStats(after.action)));
    countRowChange(row, before, after);
  }
  await upsertRows(client, table, ['action'], STATS_COLUMNS, actions.map((a) => stats.get(a)!));
}
