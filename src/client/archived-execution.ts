// Executions retention archived (src/retention/), for the client in database mode: their history
// is no longer in the store but in the archive file baton_archived_streams names, and the client
// answers from that file as the GraphQL API does (src/api/archived.ts): the final view, the
// history, and updates that end at once. A file this process cannot read is ArchivedError (code
// ARCHIVED), naming when and where it was archived and why the file could not be read, never
// "not found": the id is one an execution had.
import type pg from 'pg';
import { foldExecution, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { BatonError } from '../errors.ts';
import { asExecutionEvent, readHistoryFile, type HistoryEvent } from '../replay/history.ts';
import { ArchivedError, unreadableArchive } from '../retention/archived-history.ts';
import { archivedStream } from '../retention/store-side.ts';

export interface ArchivedExecution {
  events: HistoryEvent[];
  snapshot: ExecutionSnapshot;
  revision: bigint;
}

/** The archived execution folded from its file; undefined when it was never archived. */
export async function readArchivedExecution(pool: pg.Pool, executionId: string): Promise<ArchivedExecution | undefined> {
  const archived = await archivedStream(pool, executionStreamId(executionId));
  if (!archived) return undefined;
  try {
    const doc = await readHistoryFile(archived.archive);
    if (doc.executionId !== executionId) throw new BatonError(`it holds execution ${doc.executionId}`);
    const last = doc.events.at(-1);
    if (!last) throw new BatonError('it holds no events');
    return { events: doc.events, snapshot: foldExecution(doc.events.map(asExecutionEvent)), revision: BigInt(last.revision) };
  } catch (err) {
    throw new ArchivedError('execution', executionId, archived, unreadableArchive(err));
  }
}
