// Execution.waitingReason over real HTTP for a rate-limited action: a worker advertised
// `rateLimit: { perMinute: 2 }`, the bucket's stream holds two grants of this minute, so a
// waiting execution says it waits for a token and when the next comes back; with a token left
// it says nothing (it waits only for its turn).
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { rateLimitStreamId } from '../../schemas/rate-limit-events.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createWorkerRuntime } from '../../src/runtime/worker-kind.ts';
import { gql, useApi } from './api-harness.ts';

const api = useApi({ staleAfterMs: 30_000 });
let grantedAt = 0;

async function grant(count: number): Promise<void> {
  const { store } = api();
  const events = await store.readStream(rateLimitStreamId('core.noop'));
  grantedAt = Date.now();
  const at = new Date(grantedAt).toISOString();
  await store.append(rateLimitStreamId('core.noop'), [{ eventId: randomUUID(), type: 'RateTokensGranted', data: { at, count, limit: 2, windowMs: 60_100 }, metadata: { by: 'executor', occurredAt: at } }], {
    expectedRevision: events.length === 0 ? 'no_stream' : BigInt(events.length - 1),
  });
}

beforeAll(async () => {
  const { runtime, store, db } = api();
  await createWorkerRuntime(store).dispatch('w-limited', {
    type: 'WorkerStarted',
    data: { actions: ['core.noop'], runtimes: ['node'], capacity: 4, policies: { 'core.noop': { rateLimit: { perMinute: 2 } } } },
    by: 'worker:w-limited',
  });
  await createLivenessStore(db.pool).beat({ workerId: 'w-limited', actions: ['core.noop'], runtimes: ['node'], capacity: 4, inFlight: 0, draining: false }, { starting: true });
  await runtime.submit({ action: 'core.noop', input: null });
  await api().catchUp();
});

const reason = async () => {
  const r = await gql(api().url, `{ executions(first: 5) { edges { node { action status waitingReason } } } }`);
  expect(r.errors).toBeUndefined();
  return (r.data!.executions.edges as { node: { waitingReason: string | null } }[])[0]!.node.waitingReason;
};

describe('Execution.waitingReason for a rate limit', () => {
  it('says nothing while the bucket has a token', async () => {
    await grant(1);
    expect(await reason()).toBeNull();
  });

  it('says the execution waits for a token, and when the next one comes back', async () => {
    const first = grantedAt;
    await grant(1);
    expect(await reason()).toBe(`rate limited: action "core.noop" allows 2 per minute; next token at ${new Date(first + 60_100).toISOString()}`);
  });

  it('rateLimit(action) shows the policy and the bucket, and refuses what it cannot answer, naming the argument', async () => {
    const q = `query($action: String!, $key: String) { rateLimit(action: $action, key: $key) { action perMinute perSecond keyPath key bucket windowMs available nextTokenAt granted replayedEvents replayDivergences } }`;
    const r = await gql(api().url, q, { action: 'core.noop' });
    expect(r.errors).toBeUndefined();
    expect(r.data!.rateLimit).toMatchObject({ action: 'core.noop', perMinute: 2, perSecond: null, keyPath: null, key: null, bucket: 'core.noop', windowMs: 60_100, available: 0, granted: 2, replayedEvents: 2, replayDivergences: 0 });
    expect(r.data!.rateLimit.nextTokenAt).toMatch(/^\d{4}-/);
    expect((await gql(api().url, q, { action: 'core.echo' })).data!.rateLimit).toBeNull();
    const badKey = await gql(api().url, q, { action: 'core.noop', key: 'acme' });
    expect(badKey.errors![0]).toMatchObject({ message: 'key: action "core.noop" is limited as a whole, not per key', extensions: { code: 'BAD_USER_INPUT' } });
    const badName = await gql(api().url, q, { action: 'Not A Name' });
    expect(badName.errors![0]).toMatchObject({ message: 'action: must be an action name like "core.noop"', extensions: { code: 'BAD_USER_INPUT' } });
    const nul = await gql(api().url, q, { action: 'core.noop', key: 'a\u0000b' });
    expect(nul.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
  });
});
