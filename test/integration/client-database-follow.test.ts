// The typed client in database mode while it waits for an execution: it follows the execution's
// stream in `stream` order (a transaction held open elsewhere on the server, even in another
// database, does not hold its updates back), rides out a database outage within its signal, says
// DatabaseUnavailableError for a call that fails in one, and answers an execution retention
// archived from its archive file, as GraphQL mode does.
import { mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { DatabaseUnavailableError, createClient, defineAction, type BatonClient, type ExecutionView } from '@baton-run/baton';
import { startWorker, type EmbeddedWorker } from '@baton-run/baton/worker';
import { executionStreamId } from '../../schemas/events.ts';
import { silentLogger } from '../../src/log.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { startRelay, type TcpRelay } from '../support/tcp-relay.ts';
import { until } from '../support/until.ts';
import { useTestStore } from '../support/test-store.ts';

// Runs until the test opens its gate (a fresh one per execution).
const gates = new Map<string, () => void>();
const gated = defineAction({
  name: 'test.gated',
  input: z.object({ gate: z.string() }),
  run: ({ gate }) => new Promise<string>((resolve) => gates.set(gate, () => resolve(`${gate} opened`))),
});

let worker: EmbeddedWorker | undefined;
let client: BatonClient | undefined;
let relay: TcpRelay | undefined;
let relayed: BatonClient | undefined;
const t = useTestStore({
  max: 6,
  beforeClose: async () => {
    await client?.close();
    await relayed?.close();
    await relay?.close();
    await worker?.stop('test finished');
  },
});

beforeAll(async () => {
  worker = await startWorker({ databaseUrl: t.db.url, actions: [gated], executor: true, projector: true, id: `client-db-follow-${process.pid}`, shutdownTimeoutMs: 2_000, logger: silentLogger() });
  client = await createClient({ databaseUrl: t.db.url, actions: [gated] });
}, 60_000);

afterAll(() => gates.forEach((open) => open()));

const statusIn = async (id: string) => (await t.store.readStream(executionStreamId(id))).at(-1)?.type;
const open = async (gate: string) => {
  await until(`${gate} runs`, () => gates.has(gate), 15_000);
  gates.get(gate)!();
};

it('sees the final state promptly while a transaction is held open in another database of the server', async () => {
  const c = client!;
  // Another database of the same server (the harness's database is not the test's).
  const other = new pg.Client({ connectionString: inject('pgBaseUrl'), application_name: 'client-db-follow-open-tx' }); // the server's own, with or without BATON_DATABASE_URL
  await other.connect();
  try {
    await other.query('BEGIN');
    await other.query('SELECT txid_current()'); // a write transaction id: it holds the server's snapshot horizon back
    const { executionId } = await c.submit(gated, { gate: 'held' });
    const seen: ExecutionView[] = [];
    const following = (async () => {
      for await (const v of c.updates(executionId, { signal: AbortSignal.timeout(8_000) })) seen.push(v);
    })();
    const result = c.result(executionId, { timeout: 8_000 });
    await open('held');
    const started = performance.now();
    expect(await result).toBe('held opened');
    await following;
    expect(seen.at(-1)).toMatchObject({ status: 'Completed', final: true });
    expect(performance.now() - started).toBeLessThan(4_000); // the old client waited for the transaction's end
  } finally {
    await other.query('COMMIT').catch(() => undefined);
    await other.end();
  }
}, 30_000);

it('updates ride out an outage within their signal; get and submit in one fail with DatabaseUnavailableError', async () => {
  relay = await startRelay(new URL(t.db.url), 5432);
  relayed = await createClient({ databaseUrl: relay.url, actions: [gated] });
  const c = relayed;
  const { executionId } = await c.submit(gated, { gate: 'outage' });
  const seen: ExecutionView[] = [];
  const following = (async () => {
    for await (const v of c.updates(executionId, { signal: AbortSignal.timeout(20_000) })) seen.push(v);
  })();
  following.catch(() => undefined); // awaited below; not unhandled meanwhile
  // Following it (past its first read, which is the execution Running).
  await until('the execution runs and is followed', () => gates.has('outage') && seen.some((v) => v.status === 'Running'), 15_000);
  // Every connection cut, new ones refused, until reopened.
  await relay.down();
  const get = await c.get(executionId).catch((e: unknown) => e);
  expect(get).toBeInstanceOf(DatabaseUnavailableError);
  expect((get as Error).message).toMatch(/^lost Postgres at postgres:\/\/postgres(:\*\*\*)?@127\.0\.0\.1:\d+\/\w+ \(/); // the password, if any, redacted
  await expect(c.submit(gated, { gate: 'never' })).rejects.toBeInstanceOf(DatabaseUnavailableError);
  await expect(c.history(executionId)).rejects.toBeInstanceOf(DatabaseUnavailableError);
  // It ends while the client cannot see it (the worker is not behind the relay).
  gates.get('outage')!();
  await until('the execution completes', async () => (await statusIn(executionId)) === 'ExecutionCompleted', 10_000);
  await relay.reopen();
  await following;
  expect(seen.at(-1)).toMatchObject({ status: 'Completed', final: true, result: 'outage opened' });
  expect(await c.result(executionId, { timeout: 5_000 })).toBe('outage opened');
}, 60_000);

it('answers get, result, updates and history of an execution retention archived, from its archive file', async () => {
  const c = client!;
  const { executionId } = await c.submit(gated, { gate: 'archived' });
  await open('archived');
  expect(await c.result(executionId, { timeout: 15_000 })).toBe('archived opened');
  const before = await c.history(executionId);
  const archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-client-db-archive-'));
  try {
    // Once the projector has applied its end (retention skips it until then), an hour on.
    const later = () => new Date(Date.now() + 3_600_000);
    await until(
      'retention archived the execution',
      async () => {
        await runRetention({ pool: t.db.pool, store: t.store, olderThanMs: 60_000, archiveDir, now: later });
        return (await statusIn(executionId)) === undefined;
      },
      15_000,
      { everyMs: 200 },
    );
    expect(await c.get(executionId)).toMatchObject({ id: executionId, status: 'Completed', final: true, result: 'archived opened', action: 'test.gated' });
    const started = performance.now();
    expect(await c.result(executionId, { timeout: 5_000 })).toBe('archived opened');
    const seen: ExecutionView[] = [];
    for await (const v of c.updates(executionId, { signal: AbortSignal.timeout(5_000) })) seen.push(v);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ status: 'Completed', final: true });
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await c.history(executionId)).toEqual(before);
    // Its file gone: said so, with where it was archived, never "not found".
    const [{ archive }] = (await t.db.pool.query<{ archive: string }>('SELECT archive FROM baton_archived_streams WHERE stream_id = $1', [executionStreamId(executionId)])).rows as [{ archive: string }];
    await rename(archive, `${archive}.moved`);
    const err = await c.get(executionId).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'ARCHIVED' });
    expect((err as Error).message).toContain(`was archived at`);
    expect((err as Error).message).toContain(`to ${archive}, and that file could not be read there: no file is there (moved or deleted?)`);
  } finally {
    await rm(archiveDir, { recursive: true, force: true });
  }
}, 40_000);
