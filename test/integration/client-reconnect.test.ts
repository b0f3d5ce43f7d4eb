// The GraphQL client's long-lived calls (result, updates) across what happens to a long-lived
// connection: the API restarting gracefully (every deploy) or its connection cut, a network that
// stalls, the API refusing the subscription. A follow goes on until the execution is final or the
// caller stops it; it never ends as if done while the execution goes on, never yields one state
// twice, never outlasts its timeout or signal, and a refusal keeps the API's code, at once.
import { beforeAll, expect, it } from 'vitest';
import { BatonApiError, ExecutionFailedError, ResultTimeoutError, createClient, type BatonClient, type ExecutionView } from '@baton-run/baton';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { REQUEST_TIMEOUT_MS } from '../../src/client/graphql-client.ts';
import { startApiServer, type ApiServer, type ApiServerOptions } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { startProjector, type Projector } from '../../src/readmodel/projector-host.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { startRelay, type TcpRelay } from '../support/tcp-relay.ts';
import { until } from '../support/until.ts';
import { useTestStore } from '../support/test-store.ts';

// The projector, so rows reach the read model; no executor, so what is submitted stays Requested
// until the test cancels it.
let projector: Projector;
const servers = new Set<ApiServer>();
const clients: BatonClient[] = [];
const t = useTestStore({
  max: 10,
  beforeClose: async () => {
    for (const c of clients) await c.close();
    for (const s of servers) await s.close();
    await projector?.stop();
  },
});

const ADMIN = 'admin-token-0123456789abcdef';
async function start(port: number, o: Partial<ApiServerOptions> = {}): Promise<ApiServer> {
  const api = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry(builtinActions), log: silentLogger(), port, portSetting: '--port', ...o });
  servers.add(api);
  return api;
}
async function stop(api: ApiServer): Promise<void> {
  await api.close();
  servers.delete(api);
}
async function client(graphqlUrl: string, token?: string): Promise<BatonClient> {
  const c = await createClient({ graphqlUrl, ...(token && { token }) });
  clients.push(c);
  return c;
}
/** Every view `updates` yields, in the background, and how it ended. */
function collect(c: BatonClient, id: string, signal?: AbortSignal) {
  const views: ExecutionView[] = [];
  const ended = (async () => {
    for await (const v of c.updates(id, signal ? { signal } : {})) views.push(v);
    return 'ended';
  })().catch((e: unknown) => e);
  return { views, ended };
}
/** `p`, or a clear failure once `ms` passed (the old client waited until close()). */
const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms).unref())]);

const PORT = 48001;
let api: ApiServer;
let admin: BatonClient;
beforeAll(async () => {
  projector = startProjector({ pool: t.db.pool, store: t.store, log: silentLogger() });
  api = await start(PORT);
  admin = await client(api.url);
});

const sleeping = async () => (await admin.submit('core.sleep', { ms: 600_000 })).executionId;

it('a graceful restart of the API (a deploy) does not end updates or result: they follow on to the final state, each state once', async () => {
  const id = await sleeping();
  const c = await client(api.url);
  const u = collect(c, id);
  await until('the first view', () => u.views.length === 1);
  const result = c.result(id, { timeout: 30_000 }).catch((e: unknown) => e);
  const closing = performance.now();
  await stop(api); // ends every subscription cleanly, as SIGTERM does
  // The client subscribes again at once: one arriving while the server closes ends then too,
  // rather than holding the close to its 5 s grace cut.
  const closedIn = performance.now() - closing;
  api = await start(PORT); // before the check, so the tests after this one have their API either way
  expect(closedIn).toBeLessThan(4_000);
  await admin.cancel(id, 'after the deploy');
  const err = await within(result, 20_000, 'result');
  expect(err).toBeInstanceOf(ExecutionFailedError);
  expect(err).toMatchObject({ status: 'Cancelled' });
  expect(await within(u.ended, 20_000, 'updates')).toBe('ended');
  expect(u.views.map((v) => v.status)).toEqual(['Requested', 'Cancelled']);
});

it('with the API down longer than the timeout, result rejects with ResultTimeoutError at its timeout, not at once', async () => {
  const id = await sleeping();
  const c = await client(api.url);
  const u = collect(c, id, AbortSignal.timeout(2_500));
  await until('the first view', () => u.views.length === 1);
  const began = performance.now();
  const result = c.result(id, { timeout: 2_000 }).catch((e: unknown) => e);
  await stop(api);
  try {
    const err = await within(result, 10_000, 'result');
    expect(err).toBeInstanceOf(ResultTimeoutError);
    expect(performance.now() - began).toBeGreaterThan(1_900);
    // Its signal aborted while it was trying again: it ends as an aborted one does.
    expect(await within(u.ended, 10_000, 'updates')).toBe('ended');
  } finally {
    api = await start(PORT);
  }
});

it('a connection cut (the API killed) is followed again without the state it had yielded twice', async () => {
  const relay: TcpRelay = await startRelay(new URL(api.url), 80);
  try {
    const id = await sleeping();
    const c = await client(relay.url);
    const u = collect(c, id);
    await until('the first view', () => u.views.length === 1);
    const connections = relay.accepted();
    relay.cut();
    await until('the client to connect again', () => relay.accepted() > connections);
    await admin.cancel(id);
    expect(await within(u.ended, 20_000, 'updates')).toBe('ended');
    expect(u.views.map((v) => `${v.status} ${v.revision}`)).toEqual(['Requested 0', `Cancelled ${u.views[1]!.revision}`]);
  } finally {
    await relay.close();
  }
});

it('under a network stall result and updates end at their timeout and signal, not at close()', async () => {
  const relay = await startRelay(new URL(api.url), 80);
  try {
    const id = await sleeping();
    const c = await client(relay.url);
    relay.stall();
    const result = c.result(id, { timeout: 1_000 }).catch((e: unknown) => e);
    const u = collect(c, id, AbortSignal.timeout(1_000));
    expect(await within(result, 10_000, 'result')).toBeInstanceOf(ResultTimeoutError);
    expect(await within(u.ended, 10_000, 'updates')).toBe('ended');
  } finally {
    relay.resume();
    await relay.close();
  }
});

it(`under a network stall a plain request (get) gives up after ${REQUEST_TIMEOUT_MS / 1000} s`, { timeout: REQUEST_TIMEOUT_MS + 20_000 }, async () => {
  const relay = await startRelay(new URL(api.url), 80);
  try {
    const id = await sleeping();
    const c = await client(relay.url);
    relay.stall();
    const began = performance.now();
    const err = await within(c.get(id).catch((e: unknown) => e), REQUEST_TIMEOUT_MS + 10_000, 'get');
    expect(err).toBeInstanceOf(BatonApiError);
    expect(err).toMatchObject({ code: 'NETWORK', message: `the Baton API at ${relay.url} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s` });
    expect(performance.now() - began).toBeGreaterThan(REQUEST_TIMEOUT_MS - 100);
  } finally {
    relay.resume();
    await relay.close();
  }
});

it('a subscription refused for too many (429) is LIMIT_EXCEEDED with the API\'s message, at once', async () => {
  const limited = await start(PORT + 1, { limits: { maxSubscriptionsPerClient: 2 } });
  try {
    const id = await sleeping();
    const c = await client(limited.url);
    const ac = new AbortController();
    const open = [collect(c, id, ac.signal), collect(c, id, ac.signal)];
    await until('two followers', () => open.every((u) => u.views.length === 1));
    const began = performance.now();
    const err = await within(collect(c, id).ended, 10_000, 'the third');
    expect(err).toBeInstanceOf(BatonApiError);
    expect(err).toMatchObject({ code: 'LIMIT_EXCEEDED', message: expect.stringMatching(/2/) });
    expect(performance.now() - began).toBeLessThan(2_000);
    ac.abort();
  } finally {
    await stop(limited);
  }
});

it('a token no longer taken after a restart is UNAUTHENTICATED from the subscription, at once, not HTTP_401 after retries', async () => {
  let tokened = await start(PORT + 2, { adminToken: ADMIN });
  try {
    const c = await client(tokened.url, ADMIN);
    const { executionId: id } = await c.submit('core.sleep', { ms: 600_000 });
    const u = collect(c, id);
    await until('the first view', () => u.views.length === 1);
    await stop(tokened);
    tokened = await start(PORT + 2, { adminToken: `${ADMIN}-rotated` });
    const began = performance.now();
    const err = await within(u.ended, 10_000, 'updates');
    expect(err).toBeInstanceOf(BatonApiError);
    expect(err).toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/a valid token is required/) });
    expect(performance.now() - began).toBeLessThan(3_000);
  } finally {
    await stop(tokened);
  }
});

it('result() beyond the subscriptions the API allows one client asks for each instead, and still gets every outcome', async () => {
  const limited = await start(PORT + 2, { limits: { maxSubscriptionsPerClient: 2 } });
  try {
    const c = await client(limited.url);
    const ids = await Promise.all(Array.from({ length: 5 }, () => sleeping()));
    const results = ids.map((id) => c.result(id, { timeout: 20_000 }).catch((e: unknown) => e));
    // Two follow, three ask; give them time to have subscribed or been refused before the cancels.
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const id of ids) await admin.cancel(id, 'many at once');
    for (const r of await within(Promise.all(results), 15_000, 'the results')) {
      expect(r).toBeInstanceOf(ExecutionFailedError);
      expect(r).toMatchObject({ status: 'Cancelled' });
    }
  } finally {
    await stop(limited);
  }
});
