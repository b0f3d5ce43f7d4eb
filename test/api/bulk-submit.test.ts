// submitExecutions over real HTTP: one call, one appendMany; every input checked first (a bad one
// refuses the call, naming it, with nothing stored); a bounded count; idempotency keys inside a
// call and across calls; the admin token as for submitExecution.
import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { executionIdForKey, requestedEventIdOf } from '../../src/runtime/execution-runtime.ts';
import { gql, useApi } from './api-harness.ts';

const SUBMIT_MANY = `mutation($inputs: [SubmitExecutionInput!]!) {
  submitExecutions(inputs: $inputs) { created existing refused results { index executionId created status error { code message } } } }`;
const countEvents = async (pool: { query: (q: string) => Promise<{ rows: { n: number }[] }> }) => (await pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0]!.n;

describe('submitExecutions', () => {
  const api = useApi({ limits: { maxSubmitBatch: 50 } });
  const submitMany = (inputs: unknown[]) => gql(api().url, SUBMIT_MANY, { inputs });

  it('submits every input with one appendMany, each with its result in order', async () => {
    const appendMany = vi.spyOn(api().store, 'appendMany');
    const inputs = Array.from({ length: 40 }, (_, i) => ({ action: 'core.echo', input: { i }, priority: i % 3, tags: { batch: 'b1', n: String(i) } }));
    const r = await submitMany(inputs);
    expect(r.errors).toBeUndefined();
    expect(appendMany).toHaveBeenCalledTimes(1);
    appendMany.mockRestore();
    const out = r.data!.submitExecutions;
    expect(out).toMatchObject({ created: 40, existing: 0, refused: 0 });
    expect(out.results.map((x: any) => x.index)).toEqual(inputs.map((_, i) => i));
    for (const [i, x] of out.results.entries()) {
      expect(x).toMatchObject({ created: true, status: 'Requested', error: null });
      const [requested] = await api().store.readStream(executionStreamId(x.executionId));
      expect(requested!.data).toMatchObject({ action: 'core.echo', input: { i }, tags: { batch: 'b1', n: String(i) } });
    }
  });

  it('keys: a repeat inside the call answers the first’s execution, and a later call finds them', async () => {
    const key = `k-${randomUUID()}`;
    const first = await submitMany([
      { action: 'core.noop', idempotencyKey: key },
      { action: 'core.noop' },
      { action: 'core.noop', idempotencyKey: key },
    ]);
    const [a, b, again] = first.data!.submitExecutions.results;
    expect(first.data!.submitExecutions).toMatchObject({ created: 2, existing: 1, refused: 0 });
    expect(again).toMatchObject({ executionId: a.executionId, created: false, status: 'Requested', error: null });
    expect(b.executionId).not.toBe(a.executionId);
    expect(await api().store.readStream(executionStreamId(a.executionId))).toHaveLength(1);

    const later = await submitMany([{ action: 'core.noop', idempotencyKey: key }, { action: 'core.noop', idempotencyKey: `${key}-new` }]);
    expect(later.data!.submitExecutions.results.map((x: any) => [x.executionId === a.executionId, x.created])).toEqual([[true, false], [false, true]]);
  });

  it('keys compare values, not how they were written: inline literals (objects without a prototype) and reordered keys find the first', async () => {
    const key = `k-${randomUUID()}`;
    const inline = `mutation { submitExecutions(inputs: [{ action: "core.echo", input: { a: { b: 1, c: [1, { d: 2 }] } }, idempotencyKey: "${key}", tags: { x: "1", y: "2" } }]) { results { executionId created error { code } } } }`;
    const first = await gql(api().url, inline);
    expect(first.data!.submitExecutions.results[0]).toMatchObject({ created: true, error: null });
    const again = await gql(api().url, inline);
    expect(again.data!.submitExecutions.results[0]).toEqual({ ...first.data!.submitExecutions.results[0], created: false });
    const reordered = await submitMany([{ action: 'core.echo', input: { a: { c: [1, { d: 2 }], b: 1 } }, idempotencyKey: key, tags: { y: '2', x: '1' } }]);
    expect(reordered.data!.submitExecutions.results[0]).toMatchObject({ executionId: first.data!.submitExecutions.results[0].executionId, created: false, error: null });
    const single = await gql(api().url, `mutation { submitExecution(action: "core.echo", input: { a: { b: 1, c: [1, { d: 2 }] } }, idempotencyKey: "${key}", tags: { x: "1", y: "2" }) { executionId created } }`);
    expect(single.data!.submitExecution).toEqual({ executionId: first.data!.submitExecutions.results[0].executionId, created: false });
  });

  it('keys: a repeat inside the call is the same request exactly when a later call would find it so (one rule)', async () => {
    // Differences the record does not keep (empty tags, input left out against null) are none, in the call as across calls.
    const key = `k-${randomUUID()}`;
    const same = await submitMany([
      { action: 'core.noop', idempotencyKey: key, tags: {} },
      { action: 'core.noop', idempotencyKey: key, input: null },
    ]);
    expect(same.errors).toBeUndefined();
    const [a, b] = same.data!.submitExecutions.results;
    expect(b).toMatchObject({ executionId: a.executionId, created: false, error: null });
    const later = await submitMany([{ action: 'core.noop', idempotencyKey: key, tags: {}, input: null }]);
    expect(later.data!.submitExecutions.results[0]).toMatchObject({ executionId: a.executionId, created: false, error: null });
    // A real difference is refused up front in the call, naming the fields, as a later call names them.
    const other = `k-${randomUUID()}`;
    const refused = await submitMany([
      { action: 'core.echo', input: 1, idempotencyKey: other },
      { action: 'core.echo', input: 2, idempotencyKey: other, tags: { t: 'x' } },
    ]);
    expect(refused.errors![0]!.message).toMatch(/^inputs\.1\.idempotencyKey: the same key as inputs\.0 with a different request \(it differs in input, tags; a key gives one execution\)/);
  });

  it('a key that names an earlier, different submission refuses that input alone; the others are stored', async () => {
    const key = `k-${randomUUID()}`;
    await submitMany([{ action: 'core.echo', input: { n: 1 }, idempotencyKey: key }]);
    const r = await submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: { n: 2 }, idempotencyKey: key }]);
    expect(r.errors).toBeUndefined();
    const [ok, conflict] = r.data!.submitExecutions.results;
    expect(r.data!.submitExecutions).toMatchObject({ created: 1, existing: 0, refused: 1 });
    expect(ok).toMatchObject({ created: true, status: 'Requested', error: null });
    expect(conflict).toMatchObject({ created: false, status: null, error: { code: 'IDEMPOTENCY_CONFLICT', message: expect.stringMatching(/differs in input/) } });
  });

  it('an input the event store refuses is reported alone (REFUSED, with the id it would have had); the others are stored', async () => {
    const key = `taken-${randomUUID()}`;
    // An event already stored under the id the keyed input's ExecutionRequested takes.
    await api().store.append(`elsewhere-${key}`, [{ eventId: requestedEventIdOf(executionIdForKey(key)), type: 'Note', data: {}, metadata: {} }], { expectedRevision: 'no_stream' });
    const r = await submitMany([{ action: 'core.noop' }, { action: 'core.echo', input: 1, idempotencyKey: key }, { action: 'core.noop' }]);
    expect(r.errors).toBeUndefined();
    expect(r.data!.submitExecutions).toMatchObject({ created: 2, existing: 0, refused: 1 });
    const [first, taken, last] = r.data!.submitExecutions.results;
    expect(taken).toMatchObject({ index: 1, executionId: executionIdForKey(key), created: false, status: null, error: { code: 'REFUSED', message: expect.stringMatching(/already stored in a different position/) } });
    for (const x of [first, last]) expect((await api().store.readStream(executionStreamId(x.executionId)))[0]!.type).toBe('ExecutionRequested');
  });

  it('refuses the whole call when any input is bad, naming its index and field; stores nothing', async () => {
    const before = await countEvents(api().db.pool);
    const cases: [unknown[], RegExp, string][] = [
      [[{ action: 'core.noop' }, { action: 'core.noop' }, { action: 'core.sleep', input: { ms: -1 } }], /^inputs\.2\.input\.ms: /, 'inputs'],
      [[{ action: 'core.noop' }, { action: 'core.slep' }], /^inputs\.1\.action: unknown action "core.slep"; did you mean "core.sleep"\?/, 'inputs'],
      [[{ action: 'core.noop', maxAttempts: 0 }], /^inputs\.0\.maxAttempts: must be from 1 to 1000/, 'inputs'],
      [[{ action: 'core.noop', tags: { 'a=b': 'x' } }], /^inputs\.0\.tags\.a=b: tag key "a=b" may contain only/, 'inputs'],
      [[{ action: 'core.noop', tags: { customer: '' } }], /^inputs\.0\.tags\.customer: a tag value must not be empty/, 'inputs'],
      [[{ action: 'core.noop', tags: ['x'] }], /^inputs\.0\.tags: must be an object of tags/, 'inputs'],
      [[{ action: 'core.noop', idempotencyKey: 'same' }, { action: 'core.echo', idempotencyKey: 'same' }], /^inputs\.1\.idempotencyKey: the same key as inputs\.0 with a different request/, 'inputs'],
      [[{ action: 'core.echo', input: { a: 'x\u0000' } }], /^inputs\.0\.input\.a: must not contain a NUL/, 'inputs'],
      [[{ action: 'core.noop' }, { action: 'core.noop', namespace: 'Not A Name' }], /^inputs\.1\.namespace: must be 1 to 63/, 'inputs'],
      // One item's bad namespace does not hide the other items' problems.
      [[{ action: 'core.sleep', input: { ms: 'x' } }, { action: 'nope.x' }, { action: 'core.noop', namespace: 'Bad_NS' }], /^inputs\.0\.input\.ms: .*; inputs\.1\.action: unknown action "nope\.x".*; inputs\.2\.namespace: must be 1 to 63/, 'inputs'],
      // Every input's problems at once, not only the first bad input's.
      [[{ action: 'core.noop', namespace: 'Not A Name' }, { action: 'core.echo', input: { a: 'x\u0000' } }], /^inputs\.0\.namespace: .*; inputs\.1\.input\.a: must not contain a NUL/, 'inputs'],
      // graphql-js's own refusals of a variable's value, named as every other refusal.
      [[null], /^inputs\.0: Expected non-nullable type/, 'inputs.0'],
      [[{ action: 'core.noop', priority: 1.5 }], /^inputs\.0\.priority: Int cannot represent non-integer value: 1\.5$/, 'inputs.0.priority'],
    ];
    for (const [inputs, message, argument] of cases) {
      const r = await submitMany(inputs);
      expect(r.data ?? null, JSON.stringify(inputs)).toBeNull();
      expect(r.errors![0]!.message).toMatch(message);
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument });
      expect((r.errors![0]!.extensions as { problems?: unknown[] }).problems?.length ?? 0).toBeGreaterThan(0);
    }
    expect(await countEvents(api().db.pool)).toBe(before);
  });

  it('refuses more inputs than BATON_API_MAX_SUBMIT_BATCH, naming the argument', async () => {
    const before = await countEvents(api().db.pool);
    const r = await submitMany(Array.from({ length: 51 }, () => ({ action: 'core.noop' })));
    expect(r.errors![0]!.message).toBe('inputs: at most 50 submissions in one call (BATON_API_MAX_SUBMIT_BATCH); got 51: split them into several calls');
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'inputs' });
    expect(await countEvents(api().db.pool)).toBe(before);
    expect((await submitMany([])).data!.submitExecutions).toEqual({ created: 0, existing: 0, refused: 0, results: [] });
  });
});

describe('submitExecutions with tokens', () => {
  const api = useApi({ adminToken: 'admin-token-for-bulk-tests', readToken: 'read-token-for-bulk-tests' });

  it('needs the admin token, as submitExecution does', async () => {
    const inputs = [{ action: 'core.noop' }];
    const reader = await gql(api().url, SUBMIT_MANY, { inputs }, { token: 'read-token-for-bulk-tests' });
    expect(reader.status).toBe(403);
    expect(reader.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect((await gql(api().url, SUBMIT_MANY, { inputs })).status).toBe(401);
    const admin = await gql(api().url, SUBMIT_MANY, { inputs }, { token: 'admin-token-for-bulk-tests' });
    expect(admin.data!.submitExecutions.created).toBe(1);
  });
});

describe('the default limits', () => {
  const api = useApi();

  it('take a batch of 1,000 in a body of about 60 KB (the body limit is 1 MiB)', async () => {
    const inputs = Array.from({ length: 1_000 }, (_, i) => ({ action: 'core.echo', input: { i } }));
    const r = await gql(api().url, SUBMIT_MANY, { inputs });
    expect(r.errors).toBeUndefined();
    expect(r.data!.submitExecutions.created).toBe(1_000);
    const over = await gql(api().url, SUBMIT_MANY, { inputs: [...inputs, { action: 'core.noop' }] });
    expect(over.errors![0]!.message).toMatch(/^inputs: at most 1000 submissions in one call/);
  });
});
