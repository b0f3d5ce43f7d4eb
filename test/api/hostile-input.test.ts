// Input a hostile (or careless) client sends, over real HTTP: each is refused as BAD_USER_INPUT
// naming the argument, never answered "Unexpected error." with a stack in the log, and nothing
// is stored. Before the input rules (src/input), every one of these reached Postgres or a
// recursive check and failed there: NUL (22021 / 22P05), lone surrogates (22P02), year 0
// (22008), a position past bigint (22003), deep JSON (a stack overflow).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { encodeCursor } from '../../src/api/cursor.ts';
import { CSRF_HEADER, gql, useApi, type GqlResponse } from './api-harness.ts';

const api = useApi({}, { transport: {} });

const EXECUTIONS = `query($filter: ExecutionFilter, $after: String) { executions(filter: $filter, first: 5, after: $after) { edges { cursor } } }`;
const STATS = `query($action: String) { actionStats(action: $action) { action } }`;
const SUBMIT = `mutation($action: String!, $input: JSON, $key: String) { submitExecution(action: $action, input: $input, idempotencyKey: $key) { executionId } }`;
const CANCEL = `mutation($id: ID!, $reason: String) { cancelExecution(id: $id, reason: $reason) { executionId } }`;
const SUBMIT_WORKFLOW = `mutation($definition: JSON!) { submitWorkflow(definition: $definition) { workflowId } }`;
const DEAD_LETTERS = `query($after: String) { deadLetters(first: 5, after: $after) { edges { cursor } } }`;
const STATE_AT = `query($id: ID!, $at: DateTime) { execution(id: $id) { stateAt(at: $at) { status } } }`;

const NUL = 'a\u0000b';
const LONE = 'a\uD800b';

const eventCount = async () => (await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n as number;

/**
 * The one error: BAD_USER_INPUT, its message starting with where the problem is (`filter.since`,
 * `input.a.b`), and extensions naming the argument (for a JSON argument, the argument itself).
 */
function expectRefused(r: GqlResponse, where: string, message: RegExp): void {
  expect(r.status, r.text).toBeLessThan(500);
  expect(r.errors, r.text).toHaveLength(1);
  const [e] = r.errors!;
  const jsonArgument = ['input', 'definition'].find((a) => where === a || where.startsWith(`${a}.`));
  expect(e!.extensions, r.text).toMatchObject({ code: 'BAD_USER_INPUT', argument: jsonArgument ?? where });
  // submitWorkflow's problems come after a count: `invalid workflow (1 problem): definition.name: …`.
  expect(e!.message.replace(/^invalid workflow \(\d+ problems?\): /, '').startsWith(`${where}`), e!.message).toBe(true);
  expect(e!.message).toMatch(message);
}

/** A raw JSON request body, for values JSON.stringify would have to build recursively. */
async function postRaw(body: string): Promise<GqlResponse> {
  const res = await fetch(api().url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  const parsed = JSON.parse(text) as { data?: unknown; errors?: GqlResponse['errors'] };
  return { status: res.status, headers: res.headers, data: parsed.data as never, errors: parsed.errors, text };
}

describe('NUL characters and lone surrogates', () => {
  it('in query filters: executions(filter: {action|workerId}) and actionStats(action)', async () => {
    for (const bad of [NUL, LONE]) {
      expectRefused(await gql(api().url, EXECUTIONS, { filter: { action: bad } }), 'filter.action', /must not contain (a NUL character|a lone UTF-16 surrogate)/);
      expectRefused(await gql(api().url, EXECUTIONS, { filter: { workerId: bad } }), 'filter.workerId', /must not contain/);
      expectRefused(await gql(api().url, STATS, { action: bad }), 'action', /must not contain/);
    }
    // The same as literals in the query text.
    expectRefused(await gql(api().url, `{ actionStats(action: "x\\u0000") { action } }`), 'action', /NUL/);
  });

  it('names the argument of a literal graphql\'s own types refuse, as it names a variable\'s', async () => {
    expectRefused(await gql(api().url, `mutation { submitExecution(action: "core.noop", priority: 2147483648) { executionId } }`), 'priority', /^priority: Int cannot represent non 32-bit signed integer value: 2147483648$/);
    expectRefused(await gql(api().url, `mutation { submitExecutions(inputs: [{ action: "core.noop", priority: 1.5 }]) { created } }`), 'inputs.0.priority', /^inputs\.0\.priority: Int cannot represent non-integer value: 1\.5$/);
    expectRefused(await gql(api().url, `{ executions(first: 5, filter: { status: Done }) { edges { node { id } } } }`), 'filter.status', /^filter\.status: Value "Done" does not exist in "ExecutionStatus" enum/);
  });

  it('in submitExecution: input values and keys, the idempotency key; nothing is stored', async () => {
    const before = await eventCount();
    expectRefused(await gql(api().url, SUBMIT, { action: 'core.echo', input: { a: { b: NUL } } }), 'input.a.b', /NUL/);
    expectRefused(await gql(api().url, SUBMIT, { action: 'core.echo', input: { [NUL]: 1 } }), 'input.a\\u0000b', /key must not contain a NUL/);
    expectRefused(await gql(api().url, SUBMIT, { action: 'core.echo', input: [1, LONE] }), 'input.1', /lone UTF-16 surrogate/);
    expectRefused(await gql(api().url, SUBMIT, { action: 'core.echo', input: LONE }), 'input', /lone UTF-16 surrogate/);
    expectRefused(await gql(api().url, SUBMIT, { action: 'core.echo', key: NUL }), 'idempotencyKey', /NUL/);
    expectRefused(await gql(api().url, SUBMIT, { action: NUL }), 'action', /NUL/);
    expect(await eventCount()).toBe(before);
  });

  it('in the cancel reason, and in workflow names and step inputs; nothing is stored', async () => {
    const { executionId } = await api().runtime.submit({ action: 'core.noop' });
    const before = await eventCount();
    expectRefused(await gql(api().url, CANCEL, { id: executionId, reason: NUL }), 'reason', /NUL/);
    expectRefused(await gql(api().url, `mutation($r: String) { cancelWorkflow(id: "wf-1", reason: $r) { workflowId } }`, { r: LONE }), 'reason', /lone/);
    expectRefused(await gql(api().url, SUBMIT_WORKFLOW, { definition: { name: NUL, steps: [{ id: 'a', action: 'core.noop' }] } }), 'definition.name', /NUL/);
    expectRefused(await gql(api().url, SUBMIT_WORKFLOW, { definition: { steps: [{ id: 'a', action: 'core.echo', input: { x: LONE } }] } }), 'definition.steps.0.input.x', /lone/);
    expect(await eventCount()).toBe(before);
    expect((await api().store.readStream(executionStreamId(executionId))).map((e) => e.type)).toEqual(['ExecutionRequested']);
  });
});

describe('deep JSON (under the 64 KiB body limit)', () => {
  const submitRaw = (input: string) => postRaw(`{"query":${JSON.stringify(SUBMIT)},"variables":{"action":"core.echo","input":${input}}}`);

  it('5,000 nested arrays and 10,000 nested objects as an input; nothing is stored', async () => {
    const before = await eventCount();
    const arrays = `${'['.repeat(5_000)}1${']'.repeat(5_000)}`;
    const objects = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    expect(objects.length).toBeLessThan(64 * 1024);
    expectRefused(await submitRaw(arrays), 'input.0.0.0', /nested deeper than 100 levels/);
    expectRefused(await submitRaw(objects), 'input.a.a.a', /nested deeper than 100 levels/);
    // 100 levels is fine.
    const ok = await submitRaw(`${'['.repeat(100)}1${']'.repeat(100)}`);
    expect(ok.errors, ok.text).toBeUndefined();
    expect(await eventCount()).toBe(before + 1);
  });

  it('the same in a workflow step’s input', async () => {
    const before = await eventCount();
    const r = await postRaw(`{"query":${JSON.stringify(SUBMIT_WORKFLOW)},"variables":{"definition":{"steps":[{"id":"a","action":"core.echo","input":${'['.repeat(5_000)}1${']'.repeat(5_000)}}]}}}`);
    expectRefused(r, 'definition.steps.0.input.0', /nested deeper than 100 levels/);
    expect(await eventCount()).toBe(before);
  });
});

describe('date-times and positions out of range', () => {
  it('filter: {since|until} in year 0 or past 9999', async () => {
    expectRefused(await gql(api().url, EXECUTIONS, { filter: { since: '0000-01-01T00:00:00Z' } }), 'filter.since', /must be from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z/);
    expectRefused(await gql(api().url, `{ executions(filter: { until: "9999-12-31T23:00:00-02:00" }, first: 1) { edges { cursor } } }`), 'filter.until', /must be from 0001/);
    expect((await gql(api().url, EXECUTIONS, { filter: { since: '0001-01-01T00:00:00Z', until: '9999-12-31T23:59:59Z' } })).errors).toBeUndefined();
    // An empty window is a mistake to say, as actionTimeline says it, not an empty page.
    for (const until of ['2026-11-30T09:00:00Z', '2026-11-30T10:00:00+00:00']) {
      expectRefused(await gql(api().url, EXECUTIONS, { filter: { since: '2026-11-30T10:00:00Z', until } }), 'filter.until', /the window must not be empty: until \(.*\) must be after since/);
    }
  });

  it('stateAt(at:) in year 0', async () => {
    const { executionId } = await api().runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    expectRefused(await gql(api().url, STATE_AT, { id: executionId, at: '0000-06-01T00:00:00Z' }), 'at', /must be from 0001/);
  });

  it('an executions cursor carrying year 0', async () => {
    const cursor = encodeCursor({ requestedAt: '0000-01-01T00:00:00.000000Z', executionId: randomUUID() });
    expectRefused(await gql(api().url, EXECUTIONS, { after: cursor }), 'after', /not a cursor from this API/);
  });

  it('a dead-letter cursor with a 19-digit position beyond bigint', async () => {
    for (const position of ['9999999999999999999', '9223372036854775808']) {
      const cursor = Buffer.from(`dead-letter:${position}`).toString('base64url');
      expectRefused(await gql(api().url, DEAD_LETTERS, { after: cursor }), 'after', /not a dead-letter cursor from this API/);
    }
    const largest = Buffer.from('dead-letter:9223372036854775807').toString('base64url');
    const r = await gql(api().url, DEAD_LETTERS, { after: largest });
    expect(r.errors, r.text).toBeUndefined();
    expect(r.data!.deadLetters.edges).toEqual([]);
  });
});

describe('values the Long and DateTime scalars refuse, named by their argument', () => {
  // Before, graphql answered these with the scalar's words alone (`Long must be a whole number …`,
  // `DateTime must be an ISO 8601 date-time with a time zone …` also for a date that has a zone).
  const LONG = /^must be a whole number between -\(2\^53 - 1\) and 2\^53 - 1$/;
  const named = (where: string, problem: RegExp) => new RegExp(`^${where.replace(/[.$]/g, '\\$&')}: ${problem.source.slice(1)}`);
  const EVENTS = (fromRevision: string) => `query($id: ID!${fromRevision === '$r' ? ', $r: Long' : ''}) { events(executionId: $id, fromRevision: ${fromRevision}) { revision } }`;

  it('fromRevision: 1.5, 99999999999999999999 or "5", as literals and as variables (named by the argument they fill)', async () => {
    const id = randomUUID();
    for (const literal of ['1.5', '99999999999999999999', '"5"']) {
      const r = await gql(api().url, EVENTS(literal), { id });
      expect(r.status, r.text).toBe(400);
      expectRefused(r, 'fromRevision', named('fromRevision', LONG));
    }
    for (const value of [1.5, 1e20, '5']) expectRefused(await gql(api().url, EVENTS('$r'), { id, r: value }), 'fromRevision', named('fromRevision', LONG));
    // On a nested field too, and before any resolver runs: the execution does not exist.
    expectRefused(await gql(api().url, `query($id: ID!) { execution(id: $id) { events(fromRevision: 2.5) { revision } } }`, { id }), 'fromRevision', named('fromRevision', LONG));
    // A variable's default value is named by the variable.
    expectRefused(await gql(api().url, `query($id: ID!, $r: Long = 2.5) { events(executionId: $id, fromRevision: $r) { revision } }`, { id }), '$r', named('$r', LONG));
  });

  it('filter.since past year 9999 or on a day the calendar lacks, as literals and as variables; the same query twice', async () => {
    const cases: [string, RegExp][] = [
      ['99999-01-01T00:00:00Z', /^must be from 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z \(years 0001 to 9999 in UTC\)$/],
      ['2026-02-30T00:00:00Z', /^not a real date: 2026-02 has no day 30$/],
      ['2025-02-29T00:00:00+02:00', /^not a real date: 2025-02 has no day 29$/],
      ['2026-13-01T00:00:00Z', /^not a real date: there is no month 13$/],
      ['2026-02-01T00:00:00', /^must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z$/],
    ];
    for (const [since, problem] of cases) {
      const literal = `{ executions(first: 5, filter: { action: "core.noop", since: "${since}" }) { edges { cursor } } }`;
      for (let i = 0; i < 2; i++) expectRefused(await gql(api().url, literal), 'filter.since', named('filter.since', problem));
      expectRefused(await gql(api().url, EXECUTIONS, { filter: { since } }), 'filter.since', named('filter.since', problem));
      const other = `query($f: ExecutionFilter) { executions(first: 5, filter: $f) { edges { cursor } } }`;
      expectRefused(await gql(api().url, other, { f: { since } }), 'filter.since', named('filter.since', problem));
    }
    expect((await gql(api().url, EXECUTIONS, { filter: { since: '2024-02-29T00:00:00Z' } })).errors).toBeUndefined();
    // Each bad literal is named, not only the first.
    const both = await gql(api().url, `{ executions(first: 5, filter: { since: "2026-02-30T00:00:00Z", until: 5 }) { edges { cursor } } }`);
    expect(both.errors!.map((e) => e.message)).toEqual([
      'filter.since: not a real date: 2026-02 has no day 30',
      'filter.until: must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z',
    ]);
  });

  it('a variable used in two places keeps its own name', async () => {
    const query = `query($s: DateTime) { a: executions(first: 1, filter: { since: $s }) { edges { cursor } } b: executions(first: 1, filter: { until: $s }) { edges { cursor } } }`;
    expectRefused(await gql(api().url, query, { s: 'yesterday' }), 's', /^s: must be an ISO 8601 date-time/);
  });
});

describe('one submission check', () => {
  it('an unknown action says which it probably meant, and lists the known ones', async () => {
    const r = await gql(api().url, SUBMIT, { action: 'core.slep', input: { ms: 1 } });
    expectRefused(r, 'action', /^action: unknown action "core\.slep"; did you mean "core\.sleep"\?; known actions: core\.echo, core\.fail, core\.noop, core\.sleep, http\.request$/);
  });
});

describe('workflow definitions', () => {
  it('a NUL in the definition does not hide its other problems', async () => {
    const before = await eventCount();
    const r = await gql(api().url, SUBMIT_WORKFLOW, { definition: { name: NUL, steps: [{ id: 'a', action: 'core.echo', input: { x: LONE }, bogus: 1 }] } });
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'definition' });
    expect(r.errors![0]!.extensions!.problems).toEqual([
      { path: 'definition.name', message: expect.stringMatching(/NUL/) },
      { path: 'definition.steps.0.input.x', message: expect.stringMatching(/lone/) },
      { path: 'definition.steps.0.bogus', message: expect.stringMatching(/^unknown field/) },
    ]);
    expect(await eventCount()).toBe(before);
  });

  it('refuses unknown step fields with the name meant, and every problem in one round, fields and graph together', async () => {
    const before = await eventCount();
    const definition = {
      nmae: 'typo',
      steps: [
        { id: 'a', action: 'core.noop' },
        { id: 'b', action: 'core.noop', after: ['a'] },
        { id: 'c', action: 'core.noop', dependOn: ['a'], inputs: { x: 1 } },
        { id: 'd', action: 'core.sleep', dependsOn: ['ghost'], maxAttempts: 0 },
      ],
    };
    const r = await gql(api().url, SUBMIT_WORKFLOW, { definition });
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'definition' });
    expect(r.errors![0]!.extensions!.problems).toEqual([
      { path: 'definition.steps.1.after', message: 'unknown field; did you mean "dependsOn"?' },
      { path: 'definition.steps.2.dependOn', message: 'unknown field; did you mean "dependsOn"?' },
      { path: 'definition.steps.2.inputs', message: 'unknown field; did you mean "input"?' },
      { path: 'definition.steps.3.maxAttempts', message: expect.stringMatching(/Too small/) },
      { path: 'definition.nmae', message: 'unknown field; did you mean "name"?' },
      { path: 'definition.steps.3.dependsOn.0', message: 'no step "ghost" in this workflow' },
      { path: 'definition.steps.3.input', message: expect.stringMatching(/expected object/) },
    ]);
    expect(await eventCount()).toBe(before);
  });

  it('checks a step’s input against its action even when inputFrom fills some keys, leaving those keys to the run', async () => {
    const steps = (input: unknown) => [
      { id: 'p', action: 'core.noop' },
      { id: 'c', action: 'http.request', dependsOn: ['p'], inputFrom: { url: 'p.result.url' }, input },
    ];
    const bad = await gql(api().url, SUBMIT_WORKFLOW, { definition: { steps: steps({ method: 'FETCH', timeoutMs: -1 }) } });
    expect(bad.errors![0]!.extensions!.problems).toEqual([
      { path: 'definition.steps.1.input.method', message: expect.stringMatching(/Invalid option/) },
      { path: 'definition.steps.1.input.timeoutMs', message: expect.stringMatching(/Too small/) },
    ]);
    const notObject = await gql(api().url, SUBMIT_WORKFLOW, { definition: { steps: steps('GET') } });
    expect(notObject.errors![0]!.extensions!.problems).toEqual([{ path: 'definition.steps.1.input', message: 'must be an object when the step has inputFrom (its keys are added to it)' }]);
    const good = await gql(api().url, SUBMIT_WORKFLOW, { definition: { steps: steps({ method: 'POST' }) } });
    expect(good.errors, good.text).toBeUndefined();
  });
});

describe('a JSON key given twice in the request', () => {
  const MESSAGE = 'appears twice in one object (JSON would keep only the last): give it once';
  const SUBMIT_MANY = `mutation($inputs: [SubmitExecutionInput!]!) { submitExecutions(inputs: $inputs) { created } }`;

  /** One BAD_USER_INPUT (HTTP 400) naming `path`, the place in the body, as every input refusal names its place. */
  function expectRepeated(r: GqlResponse, path: string): void {
    expect(r.status, r.text).toBe(400);
    expect(r.errors, r.text).toEqual([{ message: `${path}: ${MESSAGE}`, extensions: { code: 'BAD_USER_INPUT', problems: [{ path, message: MESSAGE }] } }]);
  }

  it('is refused wherever it is, naming its place, where JSON.parse kept the last; nothing is stored', async () => {
    const before = await eventCount();
    const query = JSON.stringify(SUBMIT);
    expectRepeated(await postRaw(`{"query": ${query}, "variables": {"action": "core.echo", "input": {"a": 1, "a": 2}}}`), 'variables.input.a');
    expectRepeated(await postRaw(`{"query": ${query}, "variables": {"action": "core.echo", "action": "core.noop"}}`), 'variables.action');
    expectRepeated(await postRaw(`{"query": ${query}, "query": ${query}, "variables": {"action": "core.echo"}}`), 'query');
    const many = JSON.stringify(SUBMIT_MANY);
    expectRepeated(await postRaw(`{"query": ${many}, "variables": {"inputs": [{"action": "core.noop"}, {"action": "core.echo", "input": {"x": {"k": 1, "k\\u0000": 2, "k": 3}}}]}}`), 'variables.inputs.1.input.x.k');
    expect(await eventCount()).toBe(before);
  });

  it('is refused in a GET request\'s variables too', async () => {
    const url = new URL(api().url);
    url.searchParams.set('query', STATS);
    url.searchParams.set('variables', '{"action": "core.echo", "action": "core.noop"}');
    const res = await fetch(url, { headers: { [CSRF_HEADER]: '1' }, signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    expectRepeated({ status: res.status, headers: res.headers, data: undefined, errors: (JSON.parse(text) as { errors: GqlResponse['errors'] }).errors, text }, 'variables.action');
  });

  it('passes equal keys in different objects, and a quoted key inside a string; bad JSON still gets yoga\'s 400', async () => {
    const ok = await postRaw(JSON.stringify({ query: SUBMIT, variables: { action: 'core.echo', input: { a: { a: 1 }, b: [{ a: 1 }, { a: 2 }], s: '{"a":1,"a":2}' } } }));
    expect(ok.errors, ok.text).toBeUndefined();
    expect(ok.status).toBe(200);
    const bad = await postRaw('{"query": "{ workers { id } }", "query": ');
    expect(bad.status).toBe(400);
    expect(bad.errors).toEqual([{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }]);
    const notObject = await postRaw('[1]');
    expect(notObject.status, notObject.text).toBeGreaterThanOrEqual(400);
  });
});
