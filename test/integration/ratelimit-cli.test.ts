// `baton ratelimit show` as a user runs it (a real process against a real database and read
// model): the advertised limit and the bucket now, --json, the replay of the bucket's history,
// and bad arguments refused naming them. `baton status` says an execution waits for a token.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { rateLimitStreamId } from '../../schemas/rate-limit-events.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { rateBucketOf } from '../../src/runtime/rate-buckets.ts';
import { createWorkerRuntime } from '../../src/runtime/worker-kind.ts';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const baton = (...args: string[]) => runBaton(args, { databaseUrl: db().url });
let waitingId: string;

beforeAll(async () => {
  const store = createPostgresEventStore(db().pool);
  await createWorkerRuntime(store).dispatch('w-cli', {
    type: 'WorkerStarted',
    data: { actions: ['core.echo'], runtimes: ['node'], capacity: 4, policies: { 'core.echo': { rateLimit: { perMinute: 1, key: 'tenant' } } } },
    by: 'worker:w-cli',
  });
  await createLivenessStore(db().pool).beat({ workerId: 'w-cli', actions: ['core.echo'], runtimes: ['node'], capacity: 4, inFlight: 0, draining: false }, { starting: true });
  const at = new Date().toISOString();
  const bucket = rateBucketOf('core.echo', { key: 'tenant' }, () => ({ tenant: 'acme' }));
  await store.append(rateLimitStreamId(bucket), [{ eventId: randomUUID(), type: 'RateTokensGranted', data: { at, count: 1, limit: 1, windowMs: 60_100 }, metadata: { by: 'executor', occurredAt: at, stateAfter: 'Open' } }], { expectedRevision: 'no_stream' });
  waitingId = (await createExecutionRuntime(store).submit({ action: 'core.echo', input: { tenant: 'acme' } })).executionId;
  await catchUpFully(db().pool, store);
}, 60_000);

describe('baton ratelimit show', () => {
  it('shows the limit and the bucket as JSON, with its history replayed', async () => {
    const r = await baton('ratelimit', 'show', 'core.echo', '--key', 'acme', '--json');
    expect(r.code, r.stderr).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view).toMatchObject({ action: 'core.echo', rateLimit: { perMinute: 1, key: 'tenant' }, key: 'acme', available: 0, granted: 1, revision: '0', replay: { events: 1, divergences: [] } });
    expect(view.bucket).toMatch(/^core\.echo~[0-9a-f]{32}$/);
    const other = JSON.parse((await baton('ratelimit', 'show', 'core.echo', '--key', 'globex', '--json')).stdout);
    expect(other).toMatchObject({ available: 1, granted: 0, nextTokenAt: null });
    expect(JSON.parse((await baton('ratelimit', 'show', 'core.noop', '--json')).stdout)).toEqual({ action: 'core.noop', rateLimit: null });
  }, 60_000);

  it('refuses bad arguments naming them', async () => {
    const bad = await baton('ratelimit', 'show', 'Not A Name');
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/action must be a name like "core.noop"/);
  }, 60_000);

  it('baton status says the execution waits for a token', async () => {
    const r = await baton('status', waitingId, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).waiting).toMatch(/^rate limited: action "core.echo" allows 1 per minute per tenant; next token at /);
  }, 60_000);
});
