// Tags through the API: attached at submit, added by the running action (ExecutionTagged),
// projected into the read model and found with executions(filter: {tags}); bad tags are
// BAD_USER_INPUT naming the tag, with nothing stored.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { listExecutions } from '../../src/api/read-model-queries.ts';
import { flushedStat } from '../support/pg-stats.ts';
import { gql, handOff, useApi } from './api-harness.ts';

const api = useApi();
const SUBMIT = `mutation($action: String!, $tags: JSON) { submitExecution(action: $action, tags: $tags) { executionId } }`;
const LIST = `query($tags: JSON, $first: Int!) { executions(filter: { tags: $tags }, first: $first) { edges { node { id tags } } } }`;
const submit = async (tags: unknown) => (await gql(api().url, SUBMIT, { action: 'core.noop', tags })).data!.submitExecution.executionId as string;
const listed = async (tags: unknown) => (await gql(api().url, LIST, { tags, first: 100 })).data!.executions.edges.map((e: any) => e.node.id).sort();

describe('tags', () => {
  it('are stored with the submission, shown on the execution and found by filter (every tag must match)', async () => {
    const customer = `c-${randomUUID()}`;
    const a = await submit({ customer, region: 'eu' });
    const b = await submit({ customer, region: 'us' });
    const untagged = await submit(null);
    const [requested] = await api().store.readStream(executionStreamId(a));
    expect(requested!.data).toMatchObject({ tags: { customer, region: 'eu' } });
    expect((await api().store.readStream(executionStreamId(untagged)))[0]!.data).not.toHaveProperty('tags');
    await api().catchUp();

    const one = await gql(api().url, `query($id: ID!) { execution(id: $id) { tags } }`, { id: a });
    expect(one.data!.execution.tags).toEqual({ customer, region: 'eu' });
    expect((await gql(api().url, `query($id: ID!) { execution(id: $id) { tags } }`, { id: untagged })).data!.execution.tags).toEqual({});
    expect(await listed({ customer })).toEqual([a, b].sort());
    expect(await listed({ customer, region: 'us' })).toEqual([b]);
    expect(await listed({ customer, region: 'asia' })).toEqual([]);
    // No tags asked for is no filter: untagged executions too.
    expect(await listed({})).toEqual(expect.arrayContaining([a, b, untagged]));
  });

  it('a tags filter can be served by the index, which holds tagged executions only', async () => {
    const customer = `c-${randomUUID()}`;
    const tagged = await submit({ customer });
    await submit(null);
    await api().catchUp();
    // Without sequential or plain index scans, a plan must use a bitmap of some index: the tags
    // index only when the query's predicate implies the index's (tags <> '{}').
    const bitmapOnly = new pg.Pool({ connectionString: api().db.url, max: 1, options: '-c enable_seqscan=off -c enable_indexscan=off' });
    try {
      const scans = () => flushedStat(bitmapOnly, api().db.pool, `SELECT idx_scan AS n FROM pg_stat_user_indexes WHERE indexrelname = 'executions_tags'`);
      const before = await scans();
      const page = await listExecutions(bitmapOnly, { filter: { tags: { customer } }, first: 10, valueCap: 1_000 });
      expect(page.rows.map((r) => r.row.executionId)).toEqual([tagged]);
      expect(await scans()).toBeGreaterThan(before);
    } finally {
      await bitmapOnly.end();
    }
  });

  it('added by the running action are merged in (a later value wins) and found too', async () => {
    const id = await submit({ customer: 'c-1', stage: 'new' });
    await handOff(api().runtime, id, 'w1');
    await api().runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    const invoice = `inv-${randomUUID()}`;
    await api().runtime.dispatch(id, { type: 'ExecutionTagged', data: { tags: { invoice, stage: 'charged' } }, by: 'worker:w1' });
    await api().catchUp();
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { tags events { type } } }`, { id });
    expect(r.data!.execution.tags).toEqual({ customer: 'c-1', stage: 'charged', invoice });
    expect(r.data!.execution.events.map((e: any) => e.type)).toContain('ExecutionTagged');
    expect(await listed({ invoice })).toEqual([id]);
    expect(await listed({ invoice, stage: 'new' })).toEqual([]);
  });

  it('keeps keys named like Object.prototype members (constructor, prototype, toString) as given', async () => {
    const tags = { constructor: 'c', prototype: 'p', toString: 't', hasOwnProperty: 'h' };
    const id = await submit(tags);
    expect((await api().store.readStream(executionStreamId(id)))[0]!.data).toMatchObject({ tags });
    await api().catchUp();
    expect((await gql(api().url, `query($id: ID!) { execution(id: $id) { tags } }`, { id })).data!.execution.tags).toEqual(tags);
    expect(await listed({ constructor: 'c' })).toEqual([id]);
  });

  it('refuses bad tags at submit and in the filter, naming the tag; stores nothing', async () => {
    const before = (await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n;
    const cases: [unknown, RegExp][] = [
      [{ 'cust omer': 'x' }, /^tags\.cust omer: tag key "cust omer" may contain only letters, digits and _ \. : \/ -/],
      [{ customer: 'v'.repeat(257) }, /^tags\.customer: a tag value must be at most 256 characters \(got 257\)/],
      [{ customer: 42 }, /^tags\.customer: a tag value must be a string/],
      [Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])), /^tags: at most 32 tags \(got 33\)/],
      ['customer=c-42', /^tags: must be an object of tags/],
      [{ customer: 'x\u0000' }, /^tags\.customer: a tag value must not contain a NUL/],
      // An own `__proto__` key (JSON has them) was dropped by every object built from the tags.
      [JSON.parse('{"__proto__": "x", "a": "b"}'), /^tags\.__proto__: tag key "__proto__" is reserved: JavaScript reads it as an object's prototype/],
    ];
    for (const [tags, message] of cases) {
      const r = await gql(api().url, SUBMIT, { action: 'core.noop', tags });
      expect(r.data, JSON.stringify(tags)).toBeNull();
      expect(r.errors![0]!.message).toMatch(message);
      expect(r.errors![0]!.extensions!.code).toBe('BAD_USER_INPUT');
    }
    expect((await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n).toBe(before);
    const filter = await gql(api().url, LIST, { tags: { 'bad key': 'x' }, first: 10 });
    expect(filter.errors![0]!.message).toMatch(/^filter\.tags\.bad key: tag key "bad key" may contain only/);
    expect(filter.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'filter.tags' });
    const proto = await gql(api().url, LIST, { tags: JSON.parse('{"__proto__": "x"}'), first: 10 });
    expect(proto.errors![0]!.message).toMatch(/^filter\.tags\.__proto__: tag key "__proto__" is reserved/);
    const notObject = await gql(api().url, LIST, { tags: ['x'], first: 10 });
    expect(notObject.errors![0]!.message).toMatch(/^filter\.tags: must be an object of tags/);
  });
});
