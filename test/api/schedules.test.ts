// Schedules over real HTTP: createSchedule refuses what `baton schedule create` refuses, naming
// the argument; schedule shows the stream's state with its next fire times; schedules pages the
// read model by opaque cursors, refusing any it did not hand out (so does `baton schedule list`);
// pause/resume/delete/trigger; the read token may read but not create.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { encodeCursor } from '../../src/api/cursor.ts';
import { encodeDeadLetterCursor } from '../../src/api/dead-letters.ts';
import { encodeWorkflowCursor } from '../../src/api/workflow-list.ts';
import { runBaton } from '../support/cli.ts';
import { gql, useApi, type GqlResponse } from './api-harness.ts';

const api = useApi();
const CREATE = `mutation($id: ID, $cron: String, $timezone: String, $every: String, $action: String, $input: JSON, $workflow: JSON, $jitter: String, $overlap: String, $catchUp: Int, $startAt: String, $endAt: String) {
  createSchedule(id: $id, cron: $cron, timezone: $timezone, every: $every, action: $action, input: $input, workflow: $workflow, jitter: $jitter, overlap: $overlap, catchUp: $catchUp, startAt: $startAt, endAt: $endAt) {
    created schedule { id status triggerKind cron timezone everyMs targetKind action input overlap catchUp jitterMs fired skipped nextFireTimes }
  } }`;
const SCHEDULE = `query($id: ID!) { schedule(id: $id) { id status fired pauseReason nextFireTimes recentTicks { tickAt manual targetKind targetId } } }`;
const LIST = `query($first: Int!, $after: String, $status: ScheduleStatus) { schedules(first: $first, after: $after, status: $status) { edges { cursor node { id status } } pageInfo { hasNextPage endCursor } } }`;
const eventCount = async () => (await api().db.pool.query(`SELECT count(*)::int AS n FROM baton_events WHERE stream_id LIKE 'schedule-%'`)).rows[0].n as number;

describe('createSchedule', () => {
  it('refuses an unknown time zone, an invalid cron expression, an absurd date, naming each argument, and stores nothing', async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ cron: '0 9 * * *', timezone: 'Mars/Olympus', action: 'core.noop' }, 'timezone', /^timezone: unknown time zone "Mars\/Olympus"/],
      [{ cron: '61 * * * *', action: 'core.noop' }, 'cron', /^cron: invalid cron expression: .*minute/],
      [{ cron: '0 0 30 2 *', action: 'core.noop' }, 'cron', /^cron: never fires/],
      [{ every: '0s', action: 'core.noop' }, 'every', /^every: must be from 1s to 366d/],
      [{ every: 'soon', action: 'core.noop' }, 'every', /^every: must be a duration/],
      [{ every: '1m', action: 'core.noop', startAt: '99999-01-01T00:00:00Z' }, 'startAt', /^startAt: /],
      [{ every: '1m', action: 'core.noop', endAt: '2001-01-01T00:00:00Z' }, 'endAt', /^endAt: is in the past/],
      [{ every: '1m', action: 'core.nope' }, 'action', /^action: unknown action "core.nope"; did you mean "core.noop"\?/],
      [{ every: '1m', action: 'core.sleep', input: { ms: 'long' } }, 'input', /^input\.ms: /],
      [{ every: '1m' }, 'action', /^action: a schedule needs action \(an action's name\) or workflow \(a workflow definition\)$/],
      [{ action: 'core.noop' }, 'cron', /^cron: a schedule needs cron \(an expression\) or every \(a duration\)$/],
      [{ every: '1m', action: 'core.noop', overlap: 'sometimes' }, 'overlap', /^overlap: must be one of skip, allow, cancel-previous/],
      [{ every: '1m', action: 'core.noop', catchUp: 5000 }, 'catchUp', /^catchUp: must be from 0 to 1000/],
      [{ every: '1m', workflow: { steps: [{ id: 'a', action: 'core.nope' }] } }, 'workflow', /^workflow\.steps\.0\.action: unknown action/],
      [{ id: 'no spaces', every: '1m', action: 'core.noop' }, 'id', /^id: /],
    ];
    for (const [variables, argument, message] of cases) {
      const r = await gql(api().url, CREATE, variables);
      expect(r.data, JSON.stringify(variables)).toBeNull();
      expect(r.errors![0]!.message, JSON.stringify(variables)).toMatch(message);
      expect(r.errors![0]!.extensions, JSON.stringify(variables)).toMatchObject({ code: 'BAD_USER_INPUT', argument });
    }
    // A bad namespace is one problem among the others, not the only one told.
    const several = await gql(api().url, `mutation { createSchedule(cron: "0 25 * * *", action: "core.nop", namespace: "Team_A") { created } }`);
    expect(several.errors![0]!.message).toMatch(/cron: invalid cron expression: .*; action: unknown action "core\.nop".*; namespace: must be /);
    const workflow = await gql(api().url, `mutation($d: JSON!, $ns: String) { submitWorkflow(definition: $d, namespace: $ns) { workflowId } }`, { d: { steps: [{ id: 'a', action: 'core.nope' }] }, ns: 'BAD' });
    expect(workflow.errors![0]!.message).toMatch(/: namespace: must be .*; definition\.steps\.0\.action: unknown action "core\.nope"/);
    expect(await eventCount()).toBe(0);
  });

  it('creates, shows, lists, pauses, resumes, triggers and deletes', async () => {
    const created = await gql(api().url, CREATE, { id: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', action: 'core.echo', input: { n: 1 }, overlap: 'allow', catchUp: 2 });
    expect(created.errors).toBeUndefined();
    expect(created.data!.createSchedule).toMatchObject({
      created: true,
      schedule: { id: 'nightly', status: 'Active', triggerKind: 'cron', cron: '0 3 * * *', timezone: 'Europe/Berlin', everyMs: null, targetKind: 'action', action: 'core.echo', input: { n: 1 }, overlap: 'allow', catchUp: 2, jitterMs: 0, fired: 0, skipped: 0 },
    });
    const next: string[] = created.data!.createSchedule.schedule.nextFireTimes;
    expect(next).toHaveLength(5);
    for (const t of next) expect(new Date(t).toLocaleTimeString('en-GB', { timeZone: 'Europe/Berlin' })).toBe('03:00:00');
    expect((await gql(api().url, CREATE, { id: 'nightly', cron: '0 3 * * *', timezone: 'Europe/Berlin', action: 'core.echo', input: { n: 1 }, overlap: 'allow', catchUp: 2 })).data!.createSchedule.created).toBe(false);
    const conflict = await gql(api().url, CREATE, { id: 'nightly', every: '1h', action: 'core.echo' });
    expect(conflict.errors![0]!.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', argument: 'id' });
    await gql(api().url, CREATE, { id: 'often', every: '30s', action: 'core.noop' });

    await api().catchUp();
    const page1 = await gql(api().url, LIST, { first: 1 });
    const often = page1.data!.schedules.edges[0].cursor;
    expect(page1.data!.schedules).toEqual({ edges: [{ cursor: often, node: { id: 'often', status: 'Active' } }], pageInfo: { hasNextPage: true, endCursor: often } });
    const page2 = await gql(api().url, LIST, { first: 1, after: often });
    expect(page2.data!.schedules.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(['nightly']);
    expect((await gql(api().url, LIST, { first: 101 })).errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'first' });

    const paused = await gql(api().url, `mutation { pauseSchedule(id: "nightly", reason: "holiday") { scheduleId changed status message } }`);
    expect(paused.data!.pauseSchedule).toMatchObject({ changed: true, status: 'Paused' });
    await api().catchUp(); // `schedule` reads the read model once the schedule is in it
    expect((await gql(api().url, SCHEDULE, { id: 'nightly' })).data!.schedule).toMatchObject({ status: 'Paused', pauseReason: 'holiday', nextFireTimes: [] });
    expect((await gql(api().url, `mutation { resumeSchedule(id: "nightly") { changed status } }`)).data!.resumeSchedule).toEqual({ changed: true, status: 'Active' });

    const triggered = await gql(api().url, `mutation { triggerSchedule(id: "nightly") { scheduleId targetKind targetId started } }`);
    expect(triggered.data!.triggerSchedule).toMatchObject({ scheduleId: 'nightly', targetKind: 'action', started: true });
    await api().catchUp();
    const shown = (await gql(api().url, SCHEDULE, { id: 'nightly' })).data!.schedule;
    expect(shown).toMatchObject({ fired: 1, recentTicks: [{ manual: true, targetKind: 'action', targetId: triggered.data!.triggerSchedule.targetId }] });
    expect((await api().runtime.load(triggered.data!.triggerSchedule.targetId)).snapshot.context).toMatchObject({ action: 'core.echo', input: { n: 1 } });

    expect((await gql(api().url, `mutation { deleteSchedule(id: "nightly") { changed status } }`)).data!.deleteSchedule).toEqual({ changed: true, status: 'Deleted' });
    const late = await gql(api().url, `mutation { triggerSchedule(id: "nightly") { scheduleId } }`);
    expect(late.errors![0]!.extensions).toMatchObject({ code: 'CONFLICT' });
    const pausedDeleted = await gql(api().url, `mutation { pauseSchedule(id: "nightly") { changed } }`);
    expect(pausedDeleted.errors![0]).toMatchObject({ message: 'schedule nightly is deleted; nothing to pause', extensions: { code: 'CONFLICT' } });
    expect((await gql(api().url, SCHEDULE, { id: 'nope' })).data!.schedule).toBeNull();
    // Not projected yet: folded from its stream.
    await gql(api().url, CREATE, { id: 'fresh', every: '1h', action: 'core.noop' });
    expect((await gql(api().url, SCHEDULE, { id: 'fresh' })).data!.schedule).toMatchObject({ id: 'fresh', status: 'Active', fired: 0 });
    expect((await gql(api().url, `mutation { pauseSchedule(id: "nope") { changed } }`)).errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('schedules cursors', () => {
  const base64url = (text: string) => Buffer.from(text).toString('base64url');
  const NOT_OURS = 'after: not a schedule cursor from this API (pass pageInfo.endCursor of the previous page)';

  /** Every schedule id, newest first, a page of one at a time; and the cursors that got there. */
  async function pageThrough(): Promise<{ ids: string[]; cursors: string[] }> {
    const ids: string[] = [];
    const cursors: string[] = [];
    for (let after: string | null = null; ; ) {
      const r: GqlResponse = await gql(api().url, LIST, { first: 1, after });
      expect(r.errors, r.text).toBeUndefined();
      const { edges, pageInfo }: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean; endCursor: string } } = r.data!.schedules;
      ids.push(...edges.map((e) => e.node.id));
      if (!pageInfo.hasNextPage) return { ids, cursors };
      after = pageInfo.endCursor;
      cursors.push(pageInfo.endCursor);
    }
  }

  it('are opaque; one the API did not hand out is refused naming `after`, as executions, workflows and deadLetters refuse theirs', async () => {
    for (const id of ['page-a', 'page-b', 'page-c']) expect((await gql(api().url, CREATE, { id, every: '1h', action: 'core.noop' })).errors).toBeUndefined();
    await api().catchUp();
    const { ids, cursors } = await pageThrough();
    expect(ids.filter((id) => id.startsWith('page-'))).toEqual(['page-c', 'page-b', 'page-a']);
    for (const cursor of cursors) expect(ids).not.toContain(cursor);

    const refused = [
      'garbage',
      'page-b', // a bare id, as the cursors were
      base64url('schedule:'),
      base64url('schedule:no spaces'),
      base64url(`schedule:${'a'.repeat(201)}`),
      encodeCursor({ requestedAt: '2026-01-01T00:00:00.000000Z', executionId: randomUUID() }),
      encodeWorkflowCursor({ startedAt: '2026-01-01T00:00:00.000000Z', workflowId: 'page-b' }),
      encodeDeadLetterCursor('1'),
      'x'.repeat(400),
    ];
    for (const after of refused) {
      const r = await gql(api().url, LIST, { first: 2, after });
      expect(r.data, after).toBeNull();
      expect(r.errors, after).toHaveLength(1);
      expect(r.errors![0]).toMatchObject({ message: NOT_OURS, extensions: { code: 'BAD_USER_INPUT', argument: 'after' } });
    }
    // The same as a literal in the query text.
    const literal = await gql(api().url, `{ schedules(first: 2, after: "garbage") { edges { cursor } pageInfo { hasNextPage } } }`);
    expect(literal.errors![0]).toMatchObject({ message: NOT_OURS, extensions: { code: 'BAD_USER_INPUT', argument: 'after' } });

    // Well formed, but its schedule is not in the read model: the page after it would be empty for no reason.
    const ghost = await gql(api().url, LIST, { first: 2, after: base64url('schedule:ghost') });
    expect(ghost.errors![0]).toMatchObject({ message: 'after: the cursor\'s schedule "ghost" is not in the read model (pass pageInfo.endCursor of the previous page)', extensions: { code: 'BAD_USER_INPUT', argument: 'after' } });
    // After the oldest schedule there is nothing more, and that is no error.
    const oldest = await gql(api().url, LIST, { first: 1, after: base64url(`schedule:${ids.at(-1)}`) });
    expect(oldest.errors, oldest.text).toBeUndefined();
    expect(oldest.data!.schedules).toEqual({ edges: [], pageInfo: { hasNextPage: false, endCursor: null } });
  });

  it('baton schedule list refuses a bad --after the same way (exit 1), and pages with the API’s cursors', async () => {
    const list = (...args: string[]) => runBaton(['schedule', 'list', ...args], { databaseUrl: api().db.url });
    for (const [after, message] of [
      ['nope', /^baton: --after: "nope" is not a cursor from `baton schedule list` \(pass the one a full page ends with\)\n$/],
      [base64url('schedule:ghost'), /^baton: --after: the cursor's schedule "ghost" is not in the read model/],
    ] as const) {
      const r = await list('--after', after);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(message);
    }
    const api1 = await gql(api().url, LIST, { first: 1 });
    const cli1 = await list('--limit', '1', '--json');
    expect(cli1.code, cli1.stderr).toBe(0);
    const { nextAfter } = JSON.parse(cli1.stdout);
    expect(nextAfter).toBe(api1.data!.schedules.pageInfo.endCursor);
    const cli2 = await list('--limit', '1', '--json', '--after', nextAfter);
    const api2 = await gql(api().url, LIST, { first: 1, after: nextAfter });
    expect(JSON.parse(cli2.stdout).schedules.map((v: { scheduleId: string }) => v.scheduleId)).toEqual([api2.data!.schedules.edges[0].node.id]);
  }, 120_000);
});

describe('createSchedule with tokens', () => {
  const api = useApi({ adminToken: 'admin-token-0123456789', readToken: 'read-token-0123456789' });
  it('needs the admin token; the read token may read schedules', async () => {
    const r = await gql(api().url, CREATE, { every: '1m', action: 'core.noop' }, { token: 'read-token-0123456789' });
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'FORBIDDEN' });
    expect((await gql(api().url, LIST, { first: 10 }, { token: 'read-token-0123456789' })).data!.schedules.edges).toEqual([]);
  });
});
