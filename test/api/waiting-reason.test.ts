// Execution.waitingReason over real HTTP: why an execution waits in Requested, judged at read
// time from the workers' heartbeats (one query for every execution a request asks about).
import { beforeAll, describe, expect, it } from 'vitest';
import { createExecutorBeats } from '../../src/executor/partitions/executor-beats.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { gql, useApi } from './api-harness.ts';

const api = useApi({ staleAfterMs: 30_000 });
const ids: Record<string, string> = {};

beforeAll(async () => {
  const { runtime, db } = api();
  const liveness = createLivenessStore(db.pool);
  for (const action of ['core.noop', 'core.echo', 'core.sleep']) ids[action] = (await runtime.submit({ action, input: null })).executionId;
  await liveness.beat({ workerId: 'w-live', actions: ['core.noop'], runtimes: ['node'], capacity: 1, inFlight: 1, draining: false }, { starting: true });
  await liveness.beat({ workerId: 'w-leaving', actions: ['core.echo'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: true }, { starting: true });
  // A worker that offered core.sleep but went silent long ago does not count.
  await liveness.beat({ workerId: 'w-gone', actions: ['core.sleep'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false }, { starting: true });
  await db.pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - interval '1 hour' WHERE worker_id = 'w-gone'`);
  await api().catchUp();
});

describe('Execution.waitingReason', () => {
  it('says which waiting executions no live worker offers an action for, and nothing for the others', async () => {
    const r = await gql(api().url, `{ executions(first: 10) { edges { node { action status waitingReason } } } }`);
    expect(r.errors).toBeUndefined();
    const byAction = Object.fromEntries((r.data!.executions.edges as { node: { action: string; status: string; waitingReason: string | null } }[]).map((e) => [e.node.action, e.node]));
    expect(byAction['core.noop']).toEqual({ action: 'core.noop', status: 'Requested', waitingReason: null }); // offered, only busy
    expect(byAction['core.echo']!.waitingReason).toBe('no live worker offers action "core.echo" (1 draining)');
    expect(byAction['core.sleep']!.waitingReason).toBe('no live worker offers action "core.sleep"');
  });

  it('says when the live workers offering the action serve only other namespaces (`--namespaces`)', async () => {
    const { runtime, db } = api();
    const inA = (await runtime.submit({ action: 'core.fail', input: { message: 'x' }, namespace: 'team-a' })).executionId;
    const inB = (await runtime.submit({ action: 'core.fail', input: { message: 'x' }, namespace: 'team-b' })).executionId;
    const liveness = createLivenessStore(db.pool);
    await liveness.beat({ workerId: 'w-b', actions: ['core.fail'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false, namespaces: ['team-b', 'team-c'] }, { starting: true });
    await api().catchUp();
    const reason = async (id: string) => (await gql(api().url, `query($id: ID!) { execution(id: $id) { waitingReason } }`, { id })).data!.execution.waitingReason;
    expect(await reason(inA)).toBe('no live worker offers action "core.fail" to namespace "team-a" (the ones that do serve only "team-b", "team-c")');
    expect(await reason(inB)).toBeNull();
    // A worker that serves every namespace takes team-a's too.
    await liveness.beat({ workerId: 'w-all', actions: ['core.fail'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false }, { starting: true });
    expect(await reason(inA)).toBeNull();
    await liveness.remove('w-all');
    await liveness.remove('w-b');
  });

  it('says when the live workers offering the action pull from a transport no live executor publishes to', async () => {
    const { runtime, db } = api();
    const id = (await runtime.submit({ action: 'core.transport-probe', input: null })).executionId;
    const liveness = createLivenessStore(db.pool);
    const reason = async () => (await gql(api().url, `query($id: ID!) { execution(id: $id) { waitingReason } }`, { id })).data!.execution.waitingReason;
    await liveness.beat({ workerId: 'w-pg', actions: ['core.transport-probe'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false, transport: 'postgres' }, { starting: true });
    await api().catchUp();
    expect(await reason()).toBeNull(); // no executor says its transport: taken at its word
    await createExecutorBeats(db.pool, 'nats').beat({ executorId: 'x-nats', draining: false });
    expect(await reason()).toBe(
      'no live worker offers action "core.transport-probe" on the nats transport the executors publish to (the 1 that does pulls from postgres: start workers and executors with the same --transport)',
    );
    // An executor of an earlier build (no transport said) beside it changes nothing: the nats one still places no work there.
    await db.pool.query(`INSERT INTO baton_executor_liveness (executor_id, draining) VALUES ('x-old', false)`);
    expect(await reason()).toMatch(/on the nats transport/);
    // One executor on each transport: the worker is reached.
    await createExecutorBeats(db.pool, 'postgres').beat({ executorId: 'x-pg', draining: false });
    expect(await reason()).toBeNull();
    await db.pool.query(`DELETE FROM baton_executor_liveness WHERE executor_id = 'x-pg'`);
    // A worker on the executors' transport offers it.
    await liveness.beat({ workerId: 'w-nats', actions: ['core.transport-probe'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false, transport: 'nats' }, { starting: true });
    expect(await reason()).toBeNull();
    // A stale executor's transport does not count.
    await liveness.remove('w-nats');
    await db.pool.query(`UPDATE baton_executor_liveness SET heartbeat_at = now() - interval '1 hour'`);
    expect(await reason()).toBeNull();
    await db.pool.query(`DELETE FROM baton_executor_liveness`);
    await liveness.remove('w-pg');
  });

  it('refuses a heartbeat naming a malformed namespace, naming the field', async () => {
    const liveness = createLivenessStore(api().db.pool);
    await expect(liveness.beat({ workerId: 'w-bad', actions: ['core.fail'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false, namespaces: ['Team A'] })).rejects.toThrow(/namespaces\.0/);
  });

  it('is null once the execution is no longer waiting in Requested', async () => {
    const { runtime } = api();
    await runtime.dispatch(ids['core.sleep']!, { type: 'ExecutionCancelled', data: { reason: 'not needed' }, by: 'executor' });
    await api().catchUp();
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { status waitingReason } }`, { id: ids['core.sleep'] });
    expect(r.data!.execution).toEqual({ status: 'Cancelled', waitingReason: null });
  });
});
