// What `baton submit | status | events | list` do (their options are defined in main.ts):
// one execution's state and history from its stream, and many executions from the read model.
import { statusOf } from '../../../actors/execution.machine.ts';
import { workflowStreamId } from '../../../schemas/workflow-events.ts';
import { encodeCursor, parseCursor, type ExecutionCursor } from '../../api/execution-cursor.ts';
import { listExecutions } from '../../api/read-model-queries.ts';
import { BatonError, NotFoundError } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { withContext } from '../context.ts';
import { fields, table, toJson } from '../format.ts';
import { waitForFinal } from '../wait.ts';

export async function submitCommand(action: string, o: { input?: unknown; key?: string; maxAttempts?: number; priority?: number; wait?: boolean; timeout?: number; json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store }) => {
    const r = await runtime.submit({ action, input: o.input, idempotencyKey: o.key, maxAttempts: o.maxAttempts, priority: o.priority });
    if (!o.wait) {
      if (o.json) console.log(toJson({ executionId: r.executionId, created: r.created, status: statusOf(r.snapshot), revision: r.revision }));
      else console.log(`${r.created ? 'submitted' : 'already submitted (same idempotency key)'}: ${r.executionId} (${statusOf(r.snapshot)})`);
      return;
    }
    if (!o.json) process.stderr.write(`submitted ${r.executionId}; waiting for it to finish …\n`);
    const done = await waitForFinal(store, runtime, r.executionId, o.timeout);
    if (!done) {
      process.stderr.write(`baton: execution ${r.executionId} did not finish within ${o.timeout} ms\n`);
      process.exitCode = 2;
      return;
    }
    const c = done.snapshot.context;
    const status = statusOf(done.snapshot);
    if (o.json) console.log(toJson({ executionId: r.executionId, status, attempt: c.attempt, result: c.result, error: c.error }));
    else if (status === 'Completed') console.log(JSON.stringify(c.result ?? null));
    else console.log(`${status}${c.error ? `: ${c.error.message}` : ''}${c.abandonReason ? `: ${c.abandonReason}` : ''}${c.cancelReason ? `: ${c.cancelReason}` : ''}`);
    if (status !== 'Completed') process.exitCode = 1;
  });
}

/**
 * A NotFoundError for an id that names a workflow, not an execution (workflow ids are uuids by
 * default, so the argument parser cannot tell): says which command shows it.
 */
async function notAnExecution(store: EventStore, err: unknown, id: string): Promise<never> {
  if (err instanceof NotFoundError && (await store.readStream(workflowStreamId(id), { limit: 1 })).length > 0) {
    throw new BatonError(`${id} is a workflow, not an execution: run \`baton workflow status ${id}\``);
  }
  throw err;
}

export async function statusCommand(id: string, o: { json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store }) => {
    const { snapshot, revision } = await runtime.load(id).catch((err: unknown) => notAnExecution(store, err, id));
    const c = snapshot.context;
    if (o.json) {
      console.log(toJson({ executionId: id, status: statusOf(snapshot), revision, context: c }));
      return;
    }
    console.log(
      fields([
        ['execution', id],
        ['status', statusOf(snapshot)],
        ['action', c.action],
        ['owner', c.owner],
        ['worker', c.workerId],
        ['attempt', `${c.attempt} of ${c.maxAttempts}`],
        ['revision', String(revision)],
        ['requested', c.requestedAt],
        ['started', c.startedAt],
        ['finished', c.finishedAt],
        ['deadline', c.deadline],
        ['cancel requested', c.cancelRequested],
        ['result', c.result === undefined ? undefined : JSON.stringify(c.result)],
        ['error', c.error ? c.error.message : undefined],
      ]),
    );
  });
}

export async function eventsCommand(id: string, o: { json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store }) => {
    const steps = await runtime.history(id).catch((err: unknown) => notAnExecution(store, err, id));
    if (o.json) {
      console.log(toJson(steps.map(({ context: _context, next: _next, ...s }) => s)));
      return;
    }
    console.log(
      table(
        ['REV', 'TYPE', 'BY', 'STATE AFTER', 'RECORDED AT'],
        steps.map((s) => [String(s.revision), s.type, s.by, s.state, s.recordedAt]),
      ),
    );
  });
}

export interface ListOptions {
  status?: string;
  action?: string;
  worker?: string;
  since?: Date;
  until?: Date;
  limit: number;
  after?: string;
  json?: boolean;
}

/** The cursors are the GraphQL API's (`pageInfo.endCursor` works here too, and `--after` there). */
function afterCursor(value: string): ExecutionCursor {
  const cursor = parseCursor(value);
  if (!cursor) throw new BatonError(`--after: "${value.slice(0, 40)}" is not a cursor from \`baton list\` (pass the one a full page ends with)`);
  return cursor;
}

/** The command that prints the next page: the same filters and limit, after the cursor. */
function nextPageCommand(o: ListOptions, cursor: string): string {
  const quote = (v: string) => (/^[\w.:@+-]+$/.test(v) ? v : `'${v.replace(/'/g, `'\\''`)}'`);
  const flags: [string, string | undefined][] = [
    ['--status', o.status],
    ['--action', o.action],
    ['--worker', o.worker],
    ['--since', o.since?.toISOString()],
    ['--until', o.until?.toISOString()],
    ['--limit', String(o.limit)],
    ['--after', cursor],
  ];
  return ['baton list', ...flags.filter(([, v]) => v !== undefined).map(([f, v]) => `${f} ${quote(v!)}`)].join(' ');
}

/** `baton list`: the GraphQL `executions` query's filters, order (newest first) and cursors, from the read model. */
export async function listCommand(o: ListOptions): Promise<void> {
  if (o.since && o.until && o.since >= o.until) throw new BatonError('--since must be before --until');
  const after = o.after === undefined ? undefined : afterCursor(o.after);
  await withContext(async ({ pool }) => {
    const filter = { status: o.status, action: o.action, workerId: o.worker, since: o.since?.toISOString(), until: o.until?.toISOString() };
    const page = await listExecutions(pool, { filter, first: o.limit, ...(after && { after }) });
    const next = page.hasNextPage ? encodeCursor(page.rows.at(-1)!.cursor) : null;
    if (o.json) {
      console.log(toJson({ executions: page.rows.map((r) => r.row), nextCursor: next }));
      return;
    }
    if (page.rows.length === 0) {
      console.log(after ? 'no more executions' : 'no executions match');
      return;
    }
    console.log(
      table(
        ['EXECUTION', 'STATUS', 'ACTION', 'WORKER', 'ATTEMPT', 'REQUESTED', 'FINISHED'],
        page.rows.map(({ row: r }) => [r.executionId, r.status, r.action, r.workerId ?? '-', `${r.attempt}/${r.maxAttempts}`, r.requestedAt, r.finishedAt ?? '-']),
      ),
    );
    // On stderr, so `baton list > ids.txt` keeps only the table.
    if (next) process.stderr.write(`more: ${nextPageCommand(o, next)}\n`);
  });
}
