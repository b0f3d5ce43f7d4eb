// Executions retention archived (src/retention/), over GraphQL: `execution(id)` of an archived id
// answers the execution as its archive file folds (with `archived` saying when and where), and
// its `history` comes from the file, so the /ui opens it like any other. When this server cannot
// read the file, the answer is an ARCHIVED error naming when and where, never "not found".
import { executionStreamId } from '../../schemas/events.ts';
import { foldExecutionStream } from '../../projections/executions.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';
import { readHistoryFile } from '../replay/history.ts';
import { ArchivedError } from '../retention/archived-history.ts';
import { archivedStream, type ArchivedStream } from '../retention/store-side.ts';
import type { ApiContext } from './context.ts';
import type { CappedExecutionRow } from './read-model-queries.ts';

export type ArchivedExecutionRow = CappedExecutionRow & { archived: ArchivedStream };

export async function archivedExecution(ctx: Pick<ApiContext, 'pool'>, executionId: string): Promise<ArchivedExecutionRow | null> {
  const archived = await archivedStream(ctx.pool, executionStreamId(executionId));
  if (!archived) return null;
  let row: ReturnType<typeof foldExecutionStream>;
  try {
    const doc = await readHistoryFile(archived.archive);
    if (doc.executionId !== executionId) throw new Error(`it holds execution ${doc.executionId}`);
    const streamId = executionStreamId(executionId);
    const events: StoredEvent[] = doc.events.map((e) => ({ ...e, streamId, revision: BigInt(e.revision), globalPosition: 0n, recordedAt: new Date(e.recordedAt) }));
    row = foldExecutionStream(events);
  } catch {
    throw new ArchivedError('execution', executionId, archived);
  }
  if (!row) throw new ArchivedError('execution', executionId, archived);
  // Sizes unknown: the response budget measures the values themselves.
  return { ...row, inputBytes: null, resultBytes: null, errorBytes: null, lastProgressBytes: null, archived };
}
