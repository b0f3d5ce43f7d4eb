// `baton list` as a user runs it (real processes against a real database and read model):
// filters, newest-first paging with cursors, --json, and bad options refused naming the option.
// Also `baton status` / `baton events` given a workflow's id: they point to `baton workflow status`.
import { beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const baton = (...args: string[]) => runBaton(args, { databaseUrl: db().url });

interface Listed {
  executionId: string;
  status: string;
  action: string;
  workerId: string | null;
  requestedAt: string;
}
const listJson = async (...args: string[]): Promise<{ executions: Listed[]; nextCursor: string | null }> => {
  const r = await baton('list', '--json', ...args);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

let runtime: ExecutionRuntime;
const requested: string[] = [];
const completed: string[] = [];
let running: string;

/**
 * "Newest first" orders by the request's time (milliseconds), then by id: two submits within one
 * millisecond would be listed by their random ids, not in the order they came.
 */
async function submitApart(action: string): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 2));
  return (await runtime.submit({ action })).executionId;
}

async function start(action: string, workerId: string): Promise<string> {
  const executionId = await submitApart(action);
  const deadline = new Date(Date.now() + 600_000).toISOString();
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline }, by: 'executor' },
  ]);
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${workerId}` });
  return executionId;
}

beforeAll(async () => {
  runtime = createExecutionRuntime(createPostgresEventStore(db().pool));
  for (let i = 0; i < 5; i++) requested.push(await submitApart('core.noop'));
  for (let i = 0; i < 2; i++) {
    const id = await start('core.echo', 'w1');
    await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { i } }, by: 'worker:w1' });
    completed.push(id);
  }
  running = await start('core.echo', 'w2');
  await catchUpFully(db().pool, createPostgresEventStore(db().pool));
});

describe('baton list', () => {
  it('prints a table of every execution, newest first', async () => {
    const r = await baton('list');
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^EXECUTION\s+STATUS\s+ACTION\s+WORKER\s+ATTEMPT\s+REQUESTED\s+FINISHED$/);
    expect(lines).toHaveLength(9);
    expect(lines[1]).toMatch(new RegExp(`^${running}\\s+Running\\s+core\\.echo\\s+w2\\s+1/3\\s`));
    expect(lines.at(-1)).toMatch(new RegExp(`^${requested[0]}\\s+Requested\\s+core\\.noop\\s+-\\s+1/3\\s`));
    expect(r.stderr).toBe(''); // one page: no cursor to print
  });

  it('--json gives the read model rows, newest first, and no next cursor when everything fit', async () => {
    const page = await listJson();
    expect(page.nextCursor).toBeNull();
    expect(page.executions.map((e) => e.executionId)).toEqual([running, ...[...completed].reverse(), ...[...requested].reverse()]);
    expect(page.executions[0]).toMatchObject({ status: 'Running', action: 'core.echo', workerId: 'w2', attempt: 1, maxAttempts: 3 });
  });

  it('filters by status, action and worker, alone and together', async () => {
    const ids = async (...args: string[]) => (await listJson(...args)).executions.map((e) => e.executionId).sort();
    expect(await ids('--status', 'Completed')).toEqual([...completed].sort());
    expect(await ids('--action', 'core.echo')).toEqual([...completed, running].sort());
    expect(await ids('--worker', 'w2')).toEqual([running]);
    expect(await ids('--worker', 'w1', '--status', 'Completed', '--action', 'core.echo')).toEqual([...completed].sort());
    expect(await ids('--status', 'Failed')).toEqual([]);
    const none = await baton('list', '--action', 'no.such.action');
    expect(none.stdout.trim()).toBe('no executions match');
  });

  it('filters by the time requested: --since inclusive, --until exclusive', async () => {
    const all = (await listJson()).executions;
    const pivot = all[3]!.requestedAt;
    const since = await listJson('--since', pivot);
    expect(since.executions.map((e) => e.executionId)).toEqual(all.filter((e) => e.requestedAt >= pivot).map((e) => e.executionId));
    const until = await listJson('--until', pivot);
    expect(until.executions.map((e) => e.executionId)).toEqual(all.filter((e) => e.requestedAt < pivot).map((e) => e.executionId));
    expect(since.executions.length + until.executions.length).toBe(all.length);
  });

  it('pages with --limit and the cursor each full page ends with, missing and repeating nothing', async () => {
    const all = (await listJson()).executions.map((e) => e.executionId);
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 1; ; pages++) {
      const page: { executions: Listed[]; nextCursor: string | null } = await listJson('--limit', '3', ...(after ? ['--after', after] : []));
      seen.push(...page.executions.map((e) => e.executionId));
      if (!page.nextCursor) {
        expect(pages).toBe(3);
        break;
      }
      after = page.nextCursor;
    }
    expect(seen).toEqual(all);
    // In a table, the command for the next page goes to stderr (same filters), so stdout stays the table.
    const table = await baton('list', '--limit', '3', '--action', 'core.noop');
    expect(table.stdout.trim().split('\n')).toHaveLength(4);
    const more = /^more: baton list --action core\.noop --limit 3 --after ([A-Za-z0-9_-]+)\n$/.exec(table.stderr);
    expect(more, table.stderr).not.toBeNull();
    const rest = await listJson('--action', 'core.noop', '--limit', '3', '--after', more![1]!);
    expect(rest.executions.map((e) => e.executionId)).toEqual([requested[1], requested[0]]);
  });

  it('refuses bad options, naming the option and the reason', async () => {
    const refused: [string[], RegExp][] = [
      [['--status', 'Done'], /option '--status <status>' argument 'Done' is invalid\. Allowed choices are Requested, .*Abandoned/],
      [['--since', 'yesterday'], /^baton: --since: must be an ISO 8601 date-time with a time zone/],
      [['--until', '2026-13-45T00:00:00Z'], /^baton: --until: not a real date: there is no month 13/],
      [['--since', '2026-02-30T00:00:00Z'], /^baton: --since: not a real date: 2026-02 has no day 30\n?$/],
      // Year 0 and past 9999 in UTC: refused as every other date option refuses them, not a Postgres error.
      [['--until', '0000-01-01T00:00:00Z'], /^baton: --until: must be from 0001-01-01/],
      [['--since', '9999-12-31T23:59:59-01:00'], /^baton: --since: must be from 0001-01-01/],
      [['--limit', '0'], /option '--limit <n>' argument '0' is invalid\. must be an integer from 1 to 1000/],
      [['--limit', '1001'], /option '--limit <n>' argument '1001' is invalid\. must be an integer from 1 to 1000/],
      [['--limit', '2.5'], /option '--limit <n>' argument '2\.5' is invalid\. must be an integer from 1 to 1000/],
      [['--action', ' '], /option '--action <name>' argument ' ' is invalid\. must not be empty/],
      [['--worker', 'w\u0001'], /option '--worker <id>' argument .* is invalid\. must not contain control characters/],
      [['--action', 'a'.repeat(501)], /option '--action <name>' argument '.*' is invalid\. must be at most 500 characters \(got 501\)/],
      [['--after', 'not-a-cursor'], /^baton: --after: "not-a-cursor" is not a cursor from `baton list`/],
      [['--since', '2026-02-01T00:00:00Z', '--until', '2026-01-01T00:00:00Z'], /^baton: --since must be before --until/],
    ];
    for (const [args, message] of refused) {
      const r = await baton('list', ...args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stdout, args.join(' ')).toBe('');
    }
  });
});

describe('tags', () => {
  it('baton list --tag finds executions by every tag given; baton status --json shows them; a bad tag is refused naming --tag', async () => {
    const a = (await runtime.submit({ action: 'core.noop', tags: { customer: 'c-42', region: 'eu' } })).executionId;
    const b = (await runtime.submit({ action: 'core.noop', tags: { customer: 'c-42' } })).executionId;
    await catchUpFully(db().pool, createPostgresEventStore(db().pool));
    const ids = async (...args: string[]) => (await listJson(...args)).executions.map((e) => e.executionId).sort();
    expect(await ids('--tag', 'customer=c-42')).toEqual([a, b].sort());
    expect(await ids('--tag', 'customer=c-42', '--tag', 'region=eu')).toEqual([a]);
    expect(await ids('--tag', 'customer=c-43')).toEqual([]);
    const row = (await listJson('--tag', 'region=eu')).executions[0] as Listed & { tags: Record<string, string> };
    expect(row.tags).toEqual({ customer: 'c-42', region: 'eu' });
    const status = await baton('status', a, '--json');
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).tags).toEqual({ customer: 'c-42', region: 'eu' });
    const text = await baton('status', a);
    expect(text.stdout, text.stdout).toMatch(/^tags\s+customer=c-42 region=eu$/m);
    for (const [tag, message] of [['region', /^baton: --tag: must be key=value/], ['a b=c', /^baton: --tag: tag key "a b" may contain only/], [`k=${'v'.repeat(257)}`, /^baton: --tag: a tag value must be at most 256 characters/]] as const) {
      const r = await baton('list', '--tag', tag);
      expect(r.code, tag).toBe(1);
      expect(r.stderr.trimEnd(), tag).toMatch(message);
    }
  });
});

describe('baton status and events given a workflow id', () => {
  it('status, events and export take an execution id in upper case, as the API does, and its stream id', async () => {
    const id = completed[0]!;
    for (const [command, given] of [['status', id.toUpperCase()], ['events', id.toUpperCase()], ['export', id.toUpperCase()], ['status', `execution-${id}`], ['events', `execution-${id.toUpperCase()}`]] as const) {
      const r = await baton(command, given, ...(command === 'export' ? [] : ['--json']));
      expect(r.code, `${command}: ${r.stderr}`).toBe(0);
      if (command !== 'events') expect(r.stdout).toContain(id); // events --json lists the events alone
      else expect(JSON.parse(r.stdout)[0]).toMatchObject({ revision: 0 });
    }
  });

  it('points to `baton workflow status` for a workflow whose id is a uuid, and for one whose id is not', async () => {
    const submitted = await baton('workflow', 'submit', 'examples/workflows/report.yaml', '--json');
    expect(submitted.code, submitted.stderr).toBe(0);
    const { workflowId } = JSON.parse(submitted.stdout) as { workflowId: string };
    expect(workflowId).toMatch(/^[0-9a-f-]{36}$/);
    for (const command of ['status', 'events']) {
      const r = await baton(command, workflowId);
      expect(r.code, command).toBe(1);
      expect(r.stderr, command).toBe(`baton: ${workflowId} is a workflow, not an execution: run \`baton workflow status ${workflowId}\`\n`);
      const named = await baton(command, 'nightly-2026-11-21');
      expect(named.code, command).toBe(1);
      expect(named.stderr, command).toMatch(/"nightly-2026-11-21" is not an execution id \(a uuid\); for a workflow, run `baton workflow status nightly-2026-11-21`/);
    }
    // An id that is neither is still just not found.
    const missing = await baton('status', '00000000-0000-4000-8000-000000000000');
    expect(missing.stderr).toBe('baton: execution 00000000-0000-4000-8000-000000000000 not found\n');
    expect((await baton('status', 'not an id!')).stderr).toMatch(/execution id must be a uuid, got "not an id!"/);
  });
});

describe('baton status of an ended execution', () => {
  it('says why it ended where the end has a reason of its own: cancelled, abandoned', async () => {
    const cancelled = await submitApart('core.noop');
    await runtime.dispatch(cancelled, { type: 'ExecutionCancelled', data: { reason: 'not needed any more' }, by: 'executor' });
    const abandoned = await submitApart('core.noop');
    const deadline = new Date(Date.now() + 600_000).toISOString();
    await runtime.dispatch(abandoned, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w9', attempt: 1, deadline }, by: 'executor' },
    ]);
    await runtime.dispatch(abandoned, { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: 'w9', attempt: 1 }, by: 'executor' });
    await runtime.dispatch(abandoned, { type: 'ExecutionAbandoned', data: { reason: 'its work message was dead-lettered' }, by: 'executor' });
    for (const [id, line] of [[cancelled, /^cancelled\s+not needed any more$/m], [abandoned, /^abandoned\s+its work message was dead-lettered$/m]] as const) {
      const r = await baton('status', id);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(line);
    }
  });
});
