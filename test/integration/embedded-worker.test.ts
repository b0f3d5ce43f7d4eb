// `@baton-run/baton/worker` in the user's process: it drains when told to (stop(), or an
// AbortSignal), letting a running action finish rather than dropping it, and says so in health().
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { createClient, defineAction, InvalidInputError, type BatonClient } from '@baton-run/baton';
import { startWorker } from '@baton-run/baton/worker';
import { silentLogger } from '../../src/log.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const slow = defineAction({
  name: 'test.slow',
  input: z.object({ ms: z.number().int().min(0).max(10_000) }),
  async run({ ms }, ctx) {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return { waited: ms, aborted: ctx.signal.aborted };
  },
});

let db: TestDatabase;
let client: BatonClient;

beforeAll(async () => {
  db = await createTestDatabase({ max: 1 });
  client = await createClient({ databaseUrl: db.url, actions: [slow] });
});

afterAll(async () => {
  await client?.close();
  await db?.drop();
});

it('its signal aborting drains it: the running action finishes, then it reports stopped', async () => {
  const ac = new AbortController();
  const worker = await startWorker({ databaseUrl: db.url, actions: [slow], executor: true, signal: ac.signal, shutdownTimeoutMs: 10_000, logger: silentLogger() });
  expect(worker.health()).toEqual({ healthy: true, problems: [] });
  const { executionId } = await client.submit('test.slow', { ms: 800 });
  for await (const u of client.updates(executionId)) if (u.status === 'Running') break;
  expect(worker.inFlight()).toBe(1);
  ac.abort('deploy');
  expect(worker.health()).toEqual({ healthy: false, problems: ['draining'] });
  await worker.stop(); // the drain the signal started
  expect(worker.health()).toEqual({ healthy: false, problems: ['stopped'] });
  expect(await client.get(executionId)).toMatchObject({ status: 'Completed', result: { waited: 800, aborted: false } });
}, 30_000);

it('refuses options it does not understand, naming them, before connecting', async () => {
  await expect(startWorker({ databaseUrl: db.url, actions: [slow], capacty: 3 } as never)).rejects.toThrow(/^options\.capacty: unknown option/);
  await expect(startWorker({ databaseUrl: db.url, actions: [slow], capacity: 0 })).rejects.toBeInstanceOf(InvalidInputError);
  await expect(startWorker({ databaseUrl: db.url, actions: [{ name: 'x.y' }] as never })).rejects.toThrow(/options\.actions\[0\]: not an action/);
});

it('refuses options of the wrong type, naming each, before connecting', async () => {
  const err = await startWorker({ databaseUrl: db.url, actions: [slow], executor: 'yes', shutdownTimeoutMs: '100', metricsPort: 99_999, signal: 'x' } as never).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(InvalidInputError);
  expect((err as InvalidInputError).problems.map((p) => p.path)).toEqual(['options.executor', 'options.shutdownTimeoutMs', 'options.metricsPort', 'options.signal']);
  await expect(startWorker(undefined as never)).rejects.toThrow(/^options: required/);
});

it('a worker on its own (no executor, no metrics port) starts in a process with nothing else to do, and stops', async () => {
  // With nothing else pending, Node exited (code 13) while startWorker awaited the first heartbeat.
  const script = `import { startWorker } from '@baton-run/baton/worker';
    const w = await startWorker({ databaseUrl: process.env.TEST_DB_URL, actions: [] });
    console.log('started');
    await w.stop();
    console.log('stopped');`;
  // The Postgres queue: a NATS connection would keep the process alive and hide it.
  const { BATON_NATS_URL: _nats, ...withoutNats } = process.env;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('../..', import.meta.url)), env: { ...withoutNats, TEST_DB_URL: db.url }, encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toBe('started\nstopped\n');
}, 70_000);

it('refuses an id a worker of this very process already runs under', async () => {
  const first = await startWorker({ databaseUrl: db.url, actions: [slow], id: 'one-id-twice', logger: silentLogger(), shutdownTimeoutMs: 1_000 });
  try {
    await expect(startWorker({ databaseUrl: db.url, actions: [slow], id: 'one-id-twice', logger: silentLogger() })).rejects.toThrow(/^worker id "one-id-twice" is in use by a live worker \(pid \d+/);
    expect(first.health()).toEqual({ healthy: true, problems: [] });
  } finally {
    await first.stop();
  }
  // Stopped, it gave the id back: the same process may take it again.
  const again = await startWorker({ databaseUrl: db.url, actions: [slow], id: 'one-id-twice', logger: silentLogger(), shutdownTimeoutMs: 1_000 });
  await again.stop();
}, 30_000);

it('two in one process get ids of their own, and both run work', async () => {
  const [a, b] = await Promise.all([0, 1].map(() => startWorker({ databaseUrl: db.url, actions: [slow], executor: true, logger: silentLogger(), shutdownTimeoutMs: 1_000 })));
  try {
    expect(a!.workerId).not.toBe(b!.workerId);
    const ids = await Promise.all([1, 2, 3, 4].map(async () => (await client.submit('test.slow', { ms: 1 })).executionId));
    for (const id of ids) expect(await client.result(id, { timeout: 20_000 })).toEqual({ waited: 1, aborted: false });
  } finally {
    await Promise.all([a!.stop(), b!.stop()]);
  }
}, 30_000);
