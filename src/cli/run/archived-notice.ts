// What the CLI says of an execution or workflow retention archived, where it would otherwise say
// "not found": when and where it went (its callers add which commands read it there); and of an
// id the execution commands were given that is a workflow's.
import type pg from 'pg';
import { executionStreamId } from '../../../schemas/events.ts';
import { workflowStreamId } from '../../../schemas/workflow-events.ts';
import { BatonError, NotFoundError } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { archivedStream } from '../../retention/store-side.ts';

/**
 * For a NotFoundError of an execution command (status, events, inspect, export, replay): an id
 * that names a workflow (workflow ids are uuids by default, so the argument parser cannot tell),
 * live or archived, or an execution retention archived, is said to be one, with the command or
 * file that shows it. Anything else is rethrown as it is.
 */
export async function notAnExecution(store: EventStore, pool: pg.Pool, err: unknown, id: string): Promise<never> {
  if (!(err instanceof NotFoundError)) throw err;
  if ((await store.readStream(workflowStreamId(id), { limit: 1 })).length > 0) {
    throw new BatonError(`${id} is a workflow, not an execution: run \`baton workflow status ${id}\``);
  }
  const workflow = await archivedNotice(pool, 'workflow', id);
  if (workflow) throw new BatonError(`${workflow}, which lists its steps' executions): \`baton inspect <execution id>\` reads each step from its own archive file`);
  const execution = await archivedNotice(pool, 'execution', id);
  if (execution) throw new BatonError(`${execution}): \`baton inspect ${id}\` and \`baton export ${id}\` read it there`);
  throw err;
}

/** `<kind> <id> was archived at <time> (<n> events, into <file>`, left open for the caller; undefined when it was not archived. */
export async function archivedNotice(pool: pg.Pool, kind: 'execution' | 'workflow', id: string): Promise<string | undefined> {
  const archived = await archivedStream(pool, kind === 'execution' ? executionStreamId(id) : workflowStreamId(id)).catch(() => undefined);
  return archived && `${kind} ${id} was archived at ${archived.archivedAt.toISOString()} (${archived.events} events, into ${archived.archive}`;
}
