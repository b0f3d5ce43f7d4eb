// An execution's history whether it is still in the store or was archived by retention: what
// `baton inspect`, `replay <id>` and `export`, and the API's history, read. An archived one is
// read from the archive file baton_archived_streams names (as seen from this machine).
import type pg from 'pg';
import { executionStreamId } from '../../schemas/events.ts';
import { BatonError, NotFoundError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { readExecutionHistory } from '../replay/execution-history.ts';
import { readHistoryFile, type HistoryEvent } from '../replay/history.ts';
import { archivedStream, type ArchivedStream } from './store-side.ts';

/** The id was archived: its history is in `archived.archive`, no longer in the store. */
export class ArchivedError extends BatonError {
  readonly code = 'ARCHIVED';
  constructor(readonly kind: 'execution' | 'workflow', readonly id: string, readonly archived: ArchivedStream) {
    super(`${kind} ${id} was archived at ${archived.archivedAt.toISOString()} (${archived.events} events, the last recorded ${archived.lastEventAt.toISOString()}) to ${archived.archive}`);
  }
}

export async function readStoredOrArchivedHistory(store: EventStore, pool: pg.Pool, executionId: string): Promise<{ events: HistoryEvent[]; archived?: ArchivedStream }> {
  try {
    return { events: await readExecutionHistory(store, executionId) };
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    const archived = await archivedStream(pool, executionStreamId(executionId)).catch(() => undefined);
    if (!archived) throw err;
    try {
      const doc = await readHistoryFile(archived.archive);
      if (doc.executionId !== executionId) throw new BatonError(`it holds execution ${doc.executionId}`);
      return { events: doc.events, archived };
    } catch (cause) {
      throw new BatonError(`${new ArchivedError('execution', executionId, archived).message}, which cannot be read here (${(cause as Error).message}); copy the file here and use --file`, { cause });
    }
  }
}
