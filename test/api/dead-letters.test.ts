// deadLetters and retryDeadLetter over real HTTP, against the Postgres work transport of the
// test database (max-deliver 1: a message nak'ed once is a dead letter).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';
import { gql, handOff, useApi } from './api-harness.ts';

const ADMIN = 'admin-token-dead-letters-0123';
const READ = 'read-token-dead-letters-0123';
const WORKER = 'w-api';

const LIST = `query($first: Int!, $after: String) {
  deadLetters(first: $first, after: $after) {
    edges { cursor node { messageId executionId workerId runtime action attempt deliveries reason deadLetteredAt publishedAt execution { id status workerId } } }
    pageInfo { hasNextPage endCursor }
  } }`;
const RETRY = `mutation($messageId: ID!) { retryDeadLetter(messageId: $messageId) { messageId executionId deliveries reason } }`;

const message = (over: Partial<WorkMessage> = {}): WorkMessage => ({
  messageId: randomUUID(),
  executionId: randomUUID(),
  workerId: WORKER,
  runtime: 'node',
  action: 'core.noop',
  attempt: 1,
  handoffRevision: '2',
  publishedAt: new Date().toISOString(),
  ...over,
});

/** Publish, let a worker nak each once (max-deliver 1), and wait until all are dead letters. Bounded: 5 s. */
async function killAll(transport: WorkTransport, messages: WorkMessage[]): Promise<void> {
  const consumer = await transport.consume(WORKER, (d) => d.nak(), { concurrency: 4 });
  try {
    await transport.publish(messages);
    const deadline = Date.now() + 5_000;
    for (;;) {
      const found = await Promise.all(messages.map((m) => transport.getDeadLetter(m.messageId)));
      if (found.every((d) => d !== undefined)) return;
      if (Date.now() > deadline) throw new Error(`only ${found.filter(Boolean).length} of ${messages.length} became dead letters within 5 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await consumer.stop();
  }
}

describe('with a work transport', () => {
  const api = useApi({ adminToken: ADMIN, readToken: READ }, { transport: { maxDeliver: 1 } });
  const list = (variables: Record<string, unknown>, token = READ) => gql(api().url, LIST, variables, { token });

  it('lists dead letters oldest first, a page at a time, each with its execution from the read model', async () => {
    const { executionId } = await api().runtime.submit({ action: 'core.noop' });
    await handOff(api().runtime, executionId, WORKER);
    await api().catchUp();
    const known = message({ executionId, attempt: 1 });
    const others = [message({ action: 'core.echo' }), message({ runtime: 'python' })];
    for (const m of [known, ...others]) await killAll(api().transport!, [m]); // one at a time: in this order

    const first = await list({ first: 2 });
    expect(first.errors).toBeUndefined();
    const page1 = first.data!.deadLetters;
    expect(page1.edges.map((e: any) => e.node.messageId)).toEqual([known.messageId, others[0]!.messageId]);
    expect(page1.pageInfo).toEqual({ hasNextPage: true, endCursor: page1.edges[1].cursor });
    expect(page1.edges[0].node).toEqual({
      messageId: known.messageId,
      executionId,
      workerId: WORKER,
      runtime: 'node',
      action: 'core.noop',
      attempt: 1,
      deliveries: 1,
      reason: 'not acknowledged after 1 delivery',
      deadLetteredAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      publishedAt: known.publishedAt,
      execution: { id: executionId, status: 'Scheduled', workerId: WORKER },
    });
    expect(page1.edges[1].node.execution).toBeNull(); // the read model has no such execution

    const second = await list({ first: 2, after: page1.pageInfo.endCursor });
    expect(second.data!.deadLetters.edges.map((e: any) => e.node.messageId)).toEqual([others[1]!.messageId]);
    expect(second.data!.deadLetters.pageInfo).toEqual({ hasNextPage: false, endCursor: second.data!.deadLetters.edges[0].cursor });
    const third = await list({ first: 2, after: second.data!.deadLetters.pageInfo.endCursor });
    expect(third.data!.deadLetters).toEqual({ edges: [], pageInfo: { hasNextPage: false, endCursor: null } });
  });

  it('retryDeadLetter publishes the message again from delivery 1 and removes the dead letter; admin token only', async () => {
    const { executionId } = await api().runtime.submit({ action: 'core.noop' });
    await handOff(api().runtime, executionId, WORKER); // still waiting for its worker: a retry can run it
    const m = message({ executionId });
    await killAll(api().transport!, [m]);
    const forbidden = await gql(api().url, RETRY, { messageId: m.messageId }, { token: READ });
    expect(forbidden.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(await api().transport!.getDeadLetter(m.messageId)).toBeDefined();

    const r = await gql(api().url, RETRY, { messageId: m.messageId.toUpperCase() }, { token: ADMIN });
    expect(r.errors).toBeUndefined();
    expect(r.data!.retryDeadLetter).toEqual({ messageId: m.messageId, executionId: m.executionId, deliveries: 1, reason: 'not acknowledged after 1 delivery' });
    expect(await api().transport!.getDeadLetter(m.messageId)).toBeUndefined();
    const listed = (await list({ first: 100 })).data!.deadLetters.edges.map((e: any) => e.node.messageId);
    expect(listed).not.toContain(m.messageId);

    // Back in the worker's queue, its deliveries starting over.
    let delivered!: (got: { id: string; count: number }) => void;
    const got = new Promise<{ id: string; count: number }>((resolve) => (delivered = resolve));
    const consumer = await api().transport!.consume(WORKER, async (d) => {
      await d.ack();
      delivered({ id: d.message.messageId, count: d.deliveryCount });
    }, { concurrency: 1 });
    try {
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('not delivered within 5 s')), 5_000).unref());
      expect(await Promise.race([got, timeout])).toEqual({ id: m.messageId, count: 1 });
    } finally {
      await consumer.stop();
    }

    const again = await gql(api().url, RETRY, { messageId: m.messageId }, { token: ADMIN });
    expect(again.data).toBeNull();
    expect(again.errors![0]!.message).toBe(`dead letter ${m.messageId} not found`);
    expect(again.errors![0]!.extensions!.code).toBe('NOT_FOUND');
  });

  it('retryDeadLetter refuses, and keeps the dead letter, when its execution has ended or is not stored: no worker would run it', async () => {
    const { executionId } = await api().runtime.submit({ action: 'core.noop' });
    await handOff(api().runtime, executionId, WORKER);
    await api().runtime.dispatch(executionId, { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: WORKER, attempt: 1 }, by: 'executor' });
    await api().runtime.dispatch(executionId, { type: 'ExecutionAbandoned', data: { reason: 'dead-lettered (by the test)' }, by: 'executor' });
    await api().catchUp();
    // A reclaim set retryPending; the end that followed leaves none pending.
    const shown = await gql(api().url, `query($id: ID!) { execution(id: $id) { status retryPending } }`, { id: executionId }, { token: READ });
    expect(shown.data!.execution).toEqual({ status: 'Abandoned', retryPending: false });
    const [ended, gone] = [message({ executionId }), message()];
    await killAll(api().transport!, [ended, gone]);
    for (const [m, why] of [[ended, 'has ended (Abandoned)'], [gone, 'is not in the event store (archived or never stored)']] as const) {
      const r = await gql(api().url, RETRY, { messageId: m.messageId }, { token: ADMIN });
      expect(r.errors![0]!.message).toBe(`dead letter ${m.messageId} is not published again: its execution ${m.executionId} ${why}, so no worker would run it; the dead letter is kept (delete it when done), and submitting the work again runs it anew`);
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'CONFLICT', executionId: m.executionId });
      expect(await api().transport!.getDeadLetter(m.messageId)).toBeDefined();
    }
  });

  it('says which dead letters still stand: one whose execution was reclaimed and retried since is Settled, not dead work', async () => {
    const { executionId: moved } = await api().runtime.submit({ action: 'core.noop' });
    const { executionId: waiting } = await api().runtime.submit({ action: 'core.noop' });
    for (const id of [moved, waiting]) await handOff(api().runtime, id, WORKER);
    const [stale, live] = [message({ executionId: moved }), message({ executionId: waiting })];
    await killAll(api().transport!, [stale, live]);
    // Reclaimed from WORKER at its schedule-to-start deadline, retried on another worker, and completed there.
    await api().runtime.dispatch(moved, [
      { type: 'OwnershipReclaimed', data: { reason: 'schedule-to-start', workerId: WORKER, attempt: 1 }, by: 'executor' },
      { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: new Date().toISOString(), reason: 'reclaimed' }, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'w-other', attempt: 2, deadline: new Date(Date.now() + 600_000).toISOString() }, by: 'executor' },
    ]);
    await api().runtime.dispatch(moved, { type: 'ExecutionStarted', data: { attempt: 2 }, by: 'worker:w-other' });
    await api().runtime.dispatch(moved, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w-other' });

    const r = await gql(api().url, `{ deadLetters(first: 100) { edges { node { messageId standing standingReason } } } }`, {}, { token: READ });
    expect(r.errors).toBeUndefined();
    const nodes = r.data!.deadLetters.edges.map((e: any) => e.node);
    expect(nodes.find((n: any) => n.messageId === stale.messageId)).toEqual({ messageId: stale.messageId, standing: 'Settled', standingReason: 'its execution moved on to attempt 2 (Completed)' });
    expect(nodes.find((n: any) => n.messageId === live.messageId)).toEqual({
      messageId: live.messageId,
      standing: 'Outstanding',
      standingReason: `its execution still waits on this message at worker ${WORKER} (attempt 1, Scheduled)`,
    });
  });

  it('refuses arguments it cannot use, naming them', async () => {
    const badId = await gql(api().url, RETRY, { messageId: 'nope' }, { token: ADMIN });
    expect(badId.errors![0]!.message).toMatch(/^messageId: must be a dead letter's message id/);
    expect(badId.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'messageId' });
    expect((await list({ first: 0 })).errors![0]!.message).toMatch(/^first: must be from 1 to 100/);
    expect((await list({ first: 101 })).errors![0]!.message).toMatch(/^first: must be from 1 to 100/);
    for (const after of ['1', 'not a cursor', Buffer.from('dead-letter:x').toString('base64url'), Buffer.from('{"requestedAt":"x"}').toString('base64url')]) {
      const r = await list({ first: 1, after });
      expect(r.errors![0]!.message, after).toMatch(/^after: not a dead-letter cursor from this API/);
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'after' });
    }
  });
});

describe('without a work transport', () => {
  const api = useApi();

  it('says the API was started without one, for the query and the mutation', async () => {
    const message = /this API server was started without a work transport/;
    const q = await gql(api().url, `{ deadLetters(first: 10) { edges { cursor } } }`);
    expect(q.data).toBeNull();
    expect(q.errors![0]!.message).toMatch(message);
    expect(q.errors![0]!.extensions!.code).toBe('NOT_CONFIGURED');
    const m = await gql(api().url, RETRY, { messageId: randomUUID() });
    expect(m.data).toBeNull();
    expect(m.errors![0]!.message).toMatch(message);
    expect(m.errors![0]!.extensions!.code).toBe('NOT_CONFIGURED');
    // The rest of the API is unaffected.
    expect((await gql(api().url, `{ workers { id } }`)).errors).toBeUndefined();
  });
});
