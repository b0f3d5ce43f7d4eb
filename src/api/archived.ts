// Executions retention archived (src/retention/), over GraphQL: `execution(id)` of an archived id
// answers the execution as its archive file folds (with `archived` saying when and where), and
// its `history` and `events` come from the file, so the /ui opens it like any other. When this
// server cannot read the file, the answer is an ARCHIVED error naming when and where, and why
// the file could not be read there, never "not found".
import { executionStreamId } from '../../schemas/events.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { foldExecutionStream } from '../../projections/executions.ts';
import { executionEventRow } from '../../projections/execution-events.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';
import { readHistoryFile } from '../replay/history.ts';
import { ArchivedError, unreadableArchive, type UnreadableArchive } from '../retention/archived-history.ts';
import { archivedStream, type ArchivedStream } from '../retention/store-side.ts';
import { eventStoreOf, type ApiContext } from './context.ts';
import type { CappedExecutionRow, EventRow } from './read-model-queries.ts';

export type ArchivedExecutionRow = CappedExecutionRow & {
  archived: ArchivedStream;
  /** The file's events as `events` answers them (no global positions: the file keeps none). */
  archivedEvents: EventRow[];
};

/**
 * An archived execution folded from its file; null when none was archived. A file this server
 * cannot read is an ARCHIVED error, except to a token limited to namespaces: the file is what
 * says the execution's namespace, so to it the execution is not found, with no path or time.
 */
export async function archivedExecution(ctx: Pick<ApiContext, 'pool' | 'namespaces'>, executionId: string): Promise<ArchivedExecutionRow | null> {
  const archived = await archivedStream(ctx.pool, executionStreamId(executionId));
  if (!archived) return null;
  const refuse = (unreadable: UnreadableArchive) => {
    if (ctx.namespaces !== undefined) return null;
    throw new ArchivedError('execution', executionId, archived, unreadable);
  };
  const streamId = executionStreamId(executionId);
  let events: StoredEvent[];
  let row: ReturnType<typeof foldExecutionStream>;
  try {
    const doc = await readHistoryFile(archived.archive);
    if (doc.executionId !== executionId) throw new Error(`it holds execution ${doc.executionId}`);
    events = doc.events.map((e) => ({ ...e, streamId, revision: BigInt(e.revision), globalPosition: 0n, recordedAt: new Date(e.recordedAt) }));
    row = foldExecutionStream(events);
  } catch (err) {
    return refuse(unreadableArchive(err));
  }
  if (!row) return refuse({ problem: 'invalid', reason: 'its events fold to no execution' });
  const archivedEvents = events.map((e) => eventRowOf(e, null));
  // Sizes unknown: the response budget measures the values themselves.
  return { ...row, inputBytes: null, resultBytes: null, errorBytes: null, lastProgressBytes: null, archived, archivedEvents };
}

/** A stored event as `events` answers it, read whole (no sizes); an archived one has no global position. */
export function eventRowOf(e: StoredEvent, globalPosition: number | null): EventRow {
  return { ...executionEventRow(e)!, globalPosition, dataBytes: null, metadataBytes: null };
}

/** `events(fromRevision, limit)` of an archived execution, charged to the request's events. */
export function archivedEvents(ctx: Pick<ApiContext, 'loaders'>, row: ArchivedExecutionRow, w: { fromRevision: number; limit: number }): EventRow[] {
  const events = row.archivedEvents.slice(w.fromRevision, w.fromRevision + w.limit);
  ctx.loaders.takeEvents(events.length);
  return events;
}

export const isArchivedRow = (row: object): row is ArchivedExecutionRow => 'archivedEvents' in row;

/**
 * When `id` names a workflow (in the store, or archived), not an execution: what to say, as
 * `<argument>: <id> is a workflow id, …`; undefined otherwise. Two indexed lookups.
 */
export async function workflowIdProblem(ctx: Pick<ApiContext, 'pool' | 'store' | 'runtime'>, id: string, argument: string): Promise<string | undefined> {
  const streamId = workflowStreamId(id);
  const stored = await eventStoreOf(ctx).readStream(streamId, { limit: 1 });
  const archived = stored.length > 0 ? undefined : await archivedStream(ctx.pool, streamId);
  if (stored.length === 0 && !archived) return undefined;
  if (archived) return `${argument}: ${id} is a workflow id (retention archived it at ${archived.archivedAt.toISOString()}, with its steps), not an execution id`;
  return `${argument}: ${id} is a workflow id, not an execution id: workflow(id: "${id}") { steps { executionId } } names its steps' executions`;
}
