// What the CLI says of an execution or workflow retention archived, where it would otherwise say
// "not found": when and where it went (its callers add which commands read it there).
import type pg from 'pg';
import { executionStreamId } from '../../../schemas/events.ts';
import { workflowStreamId } from '../../../schemas/workflow-events.ts';
import { archivedStream } from '../../retention/store-side.ts';

/** `<kind> <id> was archived at <time> (<n> events, into <file>`, left open for the caller; undefined when it was not archived. */
export async function archivedNotice(pool: pg.Pool, kind: 'execution' | 'workflow', id: string): Promise<string | undefined> {
  const archived = await archivedStream(pool, kind === 'execution' ? executionStreamId(id) : workflowStreamId(id)).catch(() => undefined);
  return archived && `${kind} ${id} was archived at ${archived.archivedAt.toISOString()} (${archived.events} events, into ${archived.archive}`;
}
