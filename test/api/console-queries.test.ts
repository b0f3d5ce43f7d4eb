// The API the /ui console reads beyond the basics, over real HTTP: the workflows list (paged by
// cursor), an action's time slices, worker heartbeat age, slots held, the what-if fork (read
// only: nothing stored), the workflowId filter, and deleteDeadLetter (admin only).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WorkMessage } from '../../src/transport/work-transport.ts';
import { gql, handOff, startWorker, useApi } from './api-harness.ts';

const ADMIN = 'admin-token-console-0123';
const READ = 'read-token-console-0123';

describe('console queries', () => {
  const api = useApi({ adminToken: ADMIN, readToken: READ }, { transport: { maxDeliver: 1 } });
  const q = (query: string, variables: Record<string, unknown> = {}, token = READ) => gql(api().url, query, variables, { token });

  it('access: the read token may not change anything, the admin token may; both see every namespace', async () => {
    expect((await q('{ access { mayChange namespaces } }')).data).toEqual({ access: { mayChange: false, namespaces: null } });
    expect((await q('{ access { mayChange namespaces } }', {}, ADMIN)).data).toEqual({ access: { mayChange: true, namespaces: null } });
  });

  it('lists workflows newest first, a page at a time, with their step counts', async () => {
    const { runtime } = api();
    for (const [i, wf] of ['wf-a', 'wf-b', 'wf-c'].entries()) {
      for (let s = 0; s <= i; s++) await runtime.submit({ action: 'core.noop', workflowId: wf });
      await new Promise((r) => setTimeout(r, 5));
    }
    await api().catchUp();
    const LIST = `query($after: String) { workflows(first: 2, after: $after) { edges { cursor node { id executions running completed failed cancelled startedAt workflow { id } } } pageInfo { hasNextPage endCursor } } }`;
    const page1 = await q(LIST);
    expect(page1.errors).toBeUndefined();
    const w1 = page1.data!.workflows;
    expect(w1.edges.map((e: any) => [e.node.id, e.node.executions, e.node.running])).toEqual([['wf-c', 3, 3], ['wf-b', 2, 2]]);
    expect(w1.edges[0].node.workflow).toBeNull(); // no workflow stream: submitted as plain executions
    expect(w1.pageInfo.hasNextPage).toBe(true);
    const w2 = (await q(LIST, { after: w1.pageInfo.endCursor })).data!.workflows;
    expect(w2.edges.map((e: any) => e.node.id)).toEqual(['wf-a']);
    expect(w2.pageInfo.hasNextPage).toBe(false);

    // Not a cursor; a cursor's shape with a NUL or a lone surrogate in its id (a Postgres text holds neither).
    const forged = (workflowId: string) => Buffer.from(`workflow:${JSON.stringify({ startedAt: '2026-11-30T09:45:13.533000Z', workflowId })}`).toString('base64url');
    for (const after of ['bm90LWEtY3Vyc29y', forged('x\u0000'), forged('x\ud800')]) {
      const bad = await q(LIST, { after });
      expect(bad.errors![0], after).toMatchObject({ message: expect.stringMatching(/^after: not a workflow cursor/), extensions: { code: 'BAD_USER_INPUT', argument: 'after' } });
    }
    expect((await q(LIST, { after: forged('wf-z') })).errors).toBeUndefined(); // the shape itself is a cursor

    const steps = await q(`{ executions(first: 10, filter: { workflowId: "wf-b" }) { edges { node { workflowId } } } }`);
    expect(steps.data!.executions.edges).toEqual([{ node: { workflowId: 'wf-b' } }, { node: { workflowId: 'wf-b' } }]);
  });

  it('slices an action’s finished executions in time, with percentiles, and checks the window', async () => {
    const { runtime } = api();
    const run = async (ms: number, outcome: 'ok' | 'fail') => {
      const { executionId } = await runtime.submit({ action: 'core.echo', input: {} });
      await handOff(runtime, executionId, 'w-slice');
      await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w-slice' });
      await new Promise((r) => setTimeout(r, ms));
      await runtime.dispatch(
        executionId,
        outcome === 'ok'
          ? { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w-slice' }
          : { type: 'ExecutionFailed', data: { error: { message: 'no' }, retryable: false }, by: 'worker:w-slice' },
      );
    };
    // Four 30 s slices from a second ago: every run finishes inside the first.
    const since = new Date(Date.now() - 1_000).toISOString();
    await run(20, 'ok');
    await run(60, 'ok');
    await run(1, 'fail');
    await api().catchUp();
    const until = new Date(Date.parse(since) + 120_000).toISOString();
    const r = await q(`query($since: DateTime!, $until: DateTime) { actionTimeline(action: "core.echo", since: $since, until: $until, buckets: 4) { start end finished completed failed p50Ms p95Ms } }`, { since, until });
    expect(r.errors).toBeUndefined();
    const slices = r.data!.actionTimeline;
    expect(slices).toHaveLength(4);
    expect(slices[0].start).toBe(since);
    expect(slices[3].end).toBe(until);
    const busy = slices.filter((s: any) => s.finished > 0);
    expect(busy).toHaveLength(1);
    expect(busy[0]).toMatchObject({ finished: 3, completed: 2, failed: 1 });
    expect(busy[0].p50Ms).toBeGreaterThanOrEqual(20);
    expect(busy[0].p95Ms).toBeGreaterThanOrEqual(busy[0].p50Ms);
    expect(slices.find((s: any) => s.finished === 0)).toMatchObject({ completed: 0, failed: 0, p50Ms: null });

    const TL = `query($since: DateTime!, $until: DateTime, $buckets: Int) { actionTimeline(action: "core.echo", since: $since, until: $until, buckets: $buckets) { finished } }`;
    const refusals: [Record<string, unknown>, string][] = [
      [{ since, until, buckets: 0 }, 'buckets'],
      [{ since, until, buckets: 201 }, 'buckets'],
      [{ since: until, until: since }, 'until'],
      [{ since: '2020-01-01T00:00:00.000Z', until: '2020-03-01T00:00:00.000Z' }, 'since'],
    ];
    for (const [variables, argument] of refusals) {
      const bad = await q(TL, variables);
      expect(bad.errors![0]!.extensions, JSON.stringify(variables)).toMatchObject({ code: 'BAD_USER_INPUT', argument });
      expect(bad.errors![0]!.message.startsWith(`${argument}: `)).toBe(true);
    }
  });

  it('tells a worker’s heartbeat age and an action’s slots held', async () => {
    const { store, db, runtime } = api();
    await startWorker(store, 'w-age', { actions: ['core.sleep'] });
    await db.pool.query(`INSERT INTO baton_worker_liveness (worker_id, heartbeat_at, actions, runtimes, capacity) VALUES ('w-age', now() - interval '4 seconds', '{core.sleep}', '{node}', 4)`);
    const { executionId } = await runtime.submit({ action: 'core.sleep', input: { ms: 1 } });
    await handOff(runtime, executionId, 'w-age');
    await api().catchUp();
    const r = await q(`{ workers { id heartbeatAgeMs alive } actionStats(action: "core.sleep") { action queued slotsHeld } }`);
    expect(r.errors).toBeUndefined();
    const worker = r.data!.workers.find((w: any) => w.id === 'w-age');
    expect(worker.heartbeatAgeMs).toBeGreaterThanOrEqual(4_000);
    expect(worker.heartbeatAgeMs).toBeLessThan(60_000);
    expect(r.data!.actionStats).toEqual([{ action: 'core.sleep', queued: 1, slotsHeld: 1 }]);
  });

  it('forks an execution read-only: the path the machine would take, or where it refuses', async () => {
    const { runtime } = api();
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    await handOff(runtime, executionId, 'w-fork');
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w-fork' });
    await api().catchUp();
    const WHAT_IF = `query($id: ID!, $from: Int!, $events: [WhatIfEventInput!]!) { execution(id: $id) { revision whatIf(fromRevision: $from, events: $events) { fromRevision baseState ok finalState steps { type by before after owner refused } } } }`;
    const failed = await q(WHAT_IF, { id: executionId, from: 3, events: [{ type: 'ExecutionFailed', data: { error: { message: 'boom' }, retryable: false } }] });
    expect(failed.errors).toBeUndefined();
    expect(failed.data!.execution.whatIf).toEqual({
      fromRevision: 3,
      baseState: 'Running',
      ok: true,
      finalState: 'Failed',
      steps: [{ type: 'ExecutionFailed', by: 'worker:w-fork', before: 'Running', after: 'Failed', owner: 'worker:w-fork', refused: null }],
    });
    const refused = await q(WHAT_IF, { id: executionId, from: 0, events: [{ type: 'ExecutionCompleted', data: { result: 1 }, by: 'worker:w-fork' }] });
    expect(refused.data!.execution.whatIf).toMatchObject({ ok: false, finalState: 'Requested', steps: [{ after: null, refused: expect.any(String) }] });
    // Nothing was stored.
    const after = await q(`query($id: ID!) { execution(id: $id) { revision } }`, { id: executionId });
    expect(after.data!.execution.revision).toBe(failed.data!.execution.revision);
    const events = await api().store.readStream(`execution-${executionId}`);
    expect(events).toHaveLength(4);

    const bads: [Record<string, unknown>, string][] = [
      [{ id: executionId, from: 9, events: [{ type: 'ExecutionFailed' }] }, 'fromRevision'],
      [{ id: executionId, from: 0, events: [] }, 'events'],
      [{ id: executionId, from: 3, events: [{ type: 'NoSuchEvent' }] }, 'events'],
      [{ id: executionId, from: 3, events: Array.from({ length: 21 }, () => ({ type: 'ExecutionProgressed' })) }, 'events'],
    ];
    for (const [variables, argument] of bads) {
      const bad = await q(WHAT_IF, variables);
      expect(bad.errors![0]!.extensions, JSON.stringify(variables).slice(0, 120)).toMatchObject({ code: 'BAD_USER_INPUT', argument });
    }
  });

  it('deletes a dead letter with the admin token only', async () => {
    const transport = api().transport!;
    const m: WorkMessage = { messageId: randomUUID(), executionId: randomUUID(), workerId: 'w-dl', runtime: 'node', action: 'core.noop', attempt: 1, handoffRevision: '2', publishedAt: new Date().toISOString() };
    const consumer = await transport.consume('w-dl', (d) => d.nak(), { concurrency: 1 });
    await transport.publish([m]);
    for (const until = Date.now() + 5_000; !(await transport.getDeadLetter(m.messageId)); ) {
      if (Date.now() > until) throw new Error('no dead letter within 5 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    await consumer.stop();
    const DELETE = `mutation($id: ID!) { deleteDeadLetter(messageId: $id) { messageId executionId } }`;
    const refused = await q(DELETE, { id: m.messageId }, READ);
    expect(refused.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(await transport.getDeadLetter(m.messageId)).toBeDefined();
    const deleted = await q(DELETE, { id: m.messageId }, ADMIN);
    expect(deleted.data!.deleteDeadLetter).toEqual({ messageId: m.messageId, executionId: m.executionId });
    expect(await transport.getDeadLetter(m.messageId)).toBeUndefined();
    const again = await q(DELETE, { id: m.messageId }, ADMIN);
    expect(again.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    const bad = await q(DELETE, { id: 'nope' }, ADMIN);
    expect(bad.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'messageId' });
  });
});
