// What `baton list` does (its options are defined in main.ts): executions from the read model,
// with the GraphQL `executions` query's filters, order (newest first) and cursors.
import { encodeCursor, parseCursor, type ExecutionCursor } from '../../api/execution-cursor.ts';
import { listExecutions } from '../../api/read-model-queries.ts';
import { BatonError } from '../../errors.ts';
import { readContext } from '../context.ts';
import { table, toJson } from '../format.ts';

export interface ListOptions {
  status?: string;
  action?: string;
  worker?: string;
  since?: Date;
  until?: Date;
  namespace?: string;
  limit: number;
  after?: string;
  /** `--tag k=v`, repeatable: every one must match. */
  tag?: Record<string, string>;
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
    ['--namespace', o.namespace],
    ...Object.entries(o.tag ?? {}).map(([k, v]): [string, string] => ['--tag', `${k}=${v}`]),
    ['--limit', String(o.limit)],
    ['--after', cursor],
  ];
  return ['baton list', ...flags.filter(([, v]) => v !== undefined).map(([f, v]) => `${f} ${quote(v!)}`)].join(' ');
}

/** `baton list`: the GraphQL `executions` query's filters, order (newest first) and cursors, from the read model. */
export async function listCommand(o: ListOptions): Promise<void> {
  if (o.since && o.until && o.since >= o.until) throw new BatonError('--since must be before --until');
  const after = o.after === undefined ? undefined : afterCursor(o.after);
  await readContext(async ({ pool, config }) => {
    const filter = { status: o.status, action: o.action, workerId: o.worker, since: o.since?.toISOString(), until: o.until?.toISOString(), tags: o.tag, namespace: o.namespace };
    // Values over the API's per-value limit come as its truncation marker, as they would from `executions`.
    const page = await listExecutions(pool, { filter, first: o.limit, valueCap: config.apiLimits.maxValueBytes, ...(after && { after }) });
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
