// What one response may carry (BATON_API_MAX_VALUE_BYTES, BATON_API_MAX_RESPONSE_BYTES): large
// JSON values in lists come back as markers, whole on request; a response past the budget is
// refused; and building one stays cheap however large the stored values are.
import { describe, expect, it } from 'vitest';
import type { Json } from '../../src/actions/http-request.ts';
import type { ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { gql, handOff, useApi, type ApiFixture } from './api-harness.ts';

const BLOB = 'x'.repeat(60 * 1024);
const RESULT_BYTES = JSON.stringify({ blob: BLOB, i: 0 }).length; // as Postgres writes it: {"i": 0, "blob": "…"}

/** `n` Completed executions of core.echo, each with a 60 KB result. */
async function completedWithLargeResults(f: ApiFixture, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await complete(f.runtime, { blob: BLOB, i }));
  await f.catchUp();
  return ids;
}

async function complete(runtime: ExecutionRuntime, result: Json, input: Json = { small: true }): Promise<string> {
  const { executionId } = await runtime.submit({ action: 'core.echo', input });
  await handOff(runtime, executionId, 'w1');
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result }, by: 'worker:w1' });
  return executionId;
}

// The query of the report: 24.8 MB answers, and +437 MiB of RSS for four at once, before.
const PAGE = `{ executions(first: 100) { edges { node { id result events { data } history { data context } } } } }`;

describe('a page of 100 executions with 60 KB results', () => {
  const api = useApi();

  it('comes back small, each large value a marker that says how to fetch it whole', async () => {
    await completedWithLargeResults(api(), 100);
    const r = await gql(api().url, PAGE);
    expect(r.errors).toBeUndefined();
    expect(r.text.length).toBeLessThan(512 * 1024); // 100 × 60 KB = 6 MB of results alone
    const nodes = r.data!.executions.edges.map((e: any) => e.node);
    expect(nodes).toHaveLength(100);
    for (const node of nodes) {
      const marker = { $truncated: true, limit: 16 * 1024 };
      expect(node.result).toEqual({ ...marker, bytes: expect.any(Number), fetch: 'result(whole: true)' });
      expect(node.result.bytes).toBeGreaterThanOrEqual(RESULT_BYTES);
      expect(node.result.bytes).toBeLessThan(RESULT_BYTES + 16);
      // Revision 4 is ExecutionCompleted, 0 ExecutionRequested.
      expect(node.events[4].data).toMatchObject({ ...marker, fetch: 'data(whole: true)' });
      expect(node.events[0].data).toMatchObject({ action: 'core.echo' }); // small: as is
      expect(node.history[4].context).toEqual({ ...marker, bytes: expect.any(Number), fetch: 'context(whole: true)' });
      expect(node.history[0].context).toMatchObject({ action: 'core.echo' });
    }
  });

  it('four at once keep the process memory bounded', async () => {
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      const answers = await Promise.all([1, 2, 3, 4].map(() => gql(api().url, PAGE)));
      for (const a of answers) expect(a.errors).toBeUndefined();
    } finally {
      clearInterval(sample);
    }
    // Measured: +437 MiB before the budget, +40 to +60 MiB with it (of which the four folds of
    // 100 streams are most).
    expect((peak - before) / 1024 ** 2).toBeLessThan(150);
  });
});

describe('whole values', () => {
  const api = useApi();

  it('come whole outside a list and with whole: true inside one', async () => {
    const result = { blob: BLOB, i: 7 };
    const id = await complete(api().runtime, result, { note: 'y'.repeat(20 * 1024) });
    await api().catchUp();
    const one = await gql(api().url, `query($id: ID!) { execution(id: $id) { input result stateAt(revision: 4) { context } } }`, { id });
    expect(one.errors).toBeUndefined();
    expect(one.data!.execution.result).toEqual(result);
    expect(one.data!.execution.input.note).toHaveLength(20 * 1024);
    expect(one.data!.execution.stateAt.context.result).toEqual(result);

    const listed = await gql(
      api().url,
      `query($id: ID!) {
        executions(first: 5) { edges { node { input(whole: true) result(whole: true) } } }
        events(executionId: $id) { type data(whole: true) }
        execution(id: $id) { history { type context(whole: true) } events { type data } }
      }`,
      { id },
    );
    expect(listed.errors).toBeUndefined();
    expect(listed.data!.executions.edges[0].node).toEqual({ input: { note: 'y'.repeat(20 * 1024) }, result });
    expect(listed.data!.events.find((e: any) => e.type === 'ExecutionCompleted').data).toEqual({ result });
    expect(listed.data!.execution.history.at(-1).context.result).toEqual(result);
    // Without whole: the same values, inside lists, are markers.
    expect(listed.data!.execution.events.find((e: any) => e.type === 'ExecutionCompleted').data.$truncated).toBe(true);
  });

  it('leaves small values as they are, and null as null', async () => {
    const id = await complete(api().runtime, null);
    await api().catchUp();
    const r = await gql(api().url, `{ executions(first: 100) { edges { node { id input result error lastProgress } } } }`);
    const node = r.data!.executions.edges.map((e: any) => e.node).find((n: any) => n.id === id);
    expect(node).toEqual({ id, input: { small: true }, result: null, error: null, lastProgress: null });
  });
});

describe('the response budget', () => {
  const api = useApi({ limits: { maxValueBytes: 16 * 1024, maxResponseBytes: 256 * 1024 } });

  it('refuses a response whose values would pass it, naming the budget, without building it', async () => {
    await completedWithLargeResults(api(), 10);
    const r = await gql(api().url, `{ executions(first: 10) { edges { node { id result(whole: true) } } } }`);
    expect(r.data ?? null).toBeNull();
    expect(r.errors).toHaveLength(1);
    expect(r.errors![0]!.extensions!.code).toBe('RESPONSE_TOO_LARGE');
    expect(r.errors![0]!.message).toMatch(/larger than 256 KiB \(BATON_API_MAX_RESPONSE_BYTES\); ask for fewer items/);
    expect(r.text.length).toBeLessThan(1024);
    // Four whole results fit.
    const fits = await gql(api().url, `{ executions(first: 4) { edges { node { result(whole: true) } } } }`);
    expect(fits.errors).toBeUndefined();
    expect(fits.data!.executions.edges.map((e: any) => e.node.result.blob.length)).toEqual([BLOB.length, BLOB.length, BLOB.length, BLOB.length]);
  });

});

describe('history folds', () => {
  const api = useApi({ limits: { maxResponseBytes: 256 * 1024 } });

  it('stop at 4 × the response budget of event data per request, however the response is cut', async () => {
    const huge = 'h'.repeat(300 * 1024);
    for (let i = 0; i < 4; i++) await complete(api().runtime, { huge, i }); // 1.2 MB, over 1 MiB
    await api().catchUp();
    const r = await gql(api().url, `{ executions(first: 4) { edges { node { history(limit: 1) { type } } } } }`);
    expect(r.errors![0]!.message).toMatch(/^history: this request would fold more than 100000 events or 1 MiB of event data \(4 × BATON_API_MAX_RESPONSE_BYTES\); ask for fewer/);
    const fewer = await gql(api().url, `{ executions(first: 3) { edges { node { history { type } } } } }`);
    expect(fewer.errors).toBeUndefined();
    expect(fewer.data!.executions.edges).toHaveLength(3);
  });
});

describe('a small response budget', () => {
  const api = useApi({ limits: { maxValueBytes: 1024, maxResponseBytes: 16 * 1024 } });

  it('refuses a response of many small fields that pass it', async () => {
    for (let i = 0; i < 20; i++) await complete(api().runtime, { i });
    await api().catchUp();
    const r = await gql(api().url, `{ executions(first: 20) { edges { cursor node { id status action owner owners requestedAt updatedAt events { eventId type by } } } } }`);
    expect(r.errors![0]!.extensions!.code).toBe('RESPONSE_TOO_LARGE');
    expect(r.errors![0]!.message).toMatch(/larger than 16 KiB \(BATON_API_MAX_RESPONSE_BYTES\)/);
    expect(r.text.length).toBeLessThan(1024);
    expect((await gql(api().url, `{ executions(first: 2) { edges { node { id status } } } }`)).errors).toBeUndefined();
  });
});
