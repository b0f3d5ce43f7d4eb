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

/** Why an archive file could not be read where it was recorded: gone, refused, or not this history. */
export interface UnreadableArchive {
  problem: 'missing' | 'unreadable' | 'invalid';
  /** One line for an operator: `no file is there (moved or deleted?)`, `permission denied`, … */
  reason: string;
}

/**
 * The id was archived: its history is in `archived.archive`, no longer in the store. With
 * `unreadable`, this process tried that file and could not read it, and the message says why.
 */
export class ArchivedError extends BatonError {
  readonly code = 'ARCHIVED';
  constructor(
    readonly kind: 'execution' | 'workflow',
    readonly id: string,
    readonly archived: ArchivedStream,
    readonly unreadable?: UnreadableArchive,
  ) {
    super(
      `${kind} ${id} was archived at ${archived.archivedAt.toISOString()} (${archived.events} events, the last recorded ${archived.lastEventAt.toISOString()}) to ${archived.archive}` +
        (unreadable ? `, and that file could not be read there: ${unreadable.reason}` : ''),
    );
  }
}

const READ_REASONS: Record<string, UnreadableArchive> = {
  ENOENT: { problem: 'missing', reason: 'no file is there (moved or deleted?)' },
  ENOTDIR: { problem: 'missing', reason: 'no file is there (a part of the path is not a directory)' },
  EACCES: { problem: 'unreadable', reason: 'permission denied' },
  EPERM: { problem: 'unreadable', reason: 'permission denied' },
  EISDIR: { problem: 'unreadable', reason: 'it is a directory, not a file' },
};

/** Why reading an archive file failed, from the file system's error (or the file's content: `invalid`). */
export function unreadableArchive(err: unknown): UnreadableArchive {
  // readHistoryFile keeps the file system's error as the cause.
  const fsError = [err, (err as Error | undefined)?.cause].find((e): e is NodeJS.ErrnoException => typeof (e as NodeJS.ErrnoException | undefined)?.syscall === 'string');
  if (fsError) return READ_REASONS[fsError.code ?? ''] ?? { problem: 'unreadable', reason: `${fsError.code ?? 'error'} (${fsError.message})` };
  return { problem: 'invalid', reason: `it does not hold this history (${(err as Error | undefined)?.message ?? String(err)})` };
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
