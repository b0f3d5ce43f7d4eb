// `@baton-run/baton/worker` in the user's process: it drains when told to (stop(), or an
// AbortSignal), letting a running action finish rather than dropping it, and says so in health().
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { z } from 'zod';
import * as root from '@baton-run/baton';
import { createClient, defineAction, InvalidInputError, type BatonClient } from '@baton-run/baton';
import { DatabaseNotMigratedError, DatabaseUnavailableError, DuplicateActionError, PortUnavailableError, startWorker, WorkerIdInUseError } from '@baton-run/baton/worker';
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

/** Runs until the test opens its gate: a run that cannot end before the test has seen it running. */
let openGate: () => void = () => undefined;
const gate = new Promise<void>((resolve) => (openGate = resolve));
const gated = defineAction({
  name: 'test.gated',
  input: z.null(),
  async run(_input, ctx) {
    await gate;
    return { aborted: ctx.signal.aborted };
  },
});

let db: TestDatabase;
let client: BatonClient;

beforeAll(async () => {
  db = await createTestDatabase({ max: 1 });
  client = await createClient({ databaseUrl: db.url, actions: [slow, gated] });
});

afterAll(async () => {
  await client?.close();
  await db?.drop();
});

it('its signal aborting drains it: the running action finishes, then it reports stopped', async () => {
  const ac = new AbortController();
  const worker = await startWorker({ databaseUrl: db.url, actions: [slow, gated], executor: true, signal: ac.signal, shutdownTimeoutMs: 10_000, logger: silentLogger() });
  expect(worker.health()).toEqual({ healthy: true, problems: [] });
  const { executionId } = await client.submit('test.gated', null);
  for await (const u of client.updates(executionId)) if (u.status === 'Running') break;
  // The run waits on the gate, so it is still running however slow the machine (an 800 ms sleep
  // had ended before a loaded machine delivered the Running update).
  expect(worker.inFlight()).toBe(1);
  ac.abort('deploy');
  expect(worker.health()).toEqual({ healthy: false, problems: ['draining'] });
  const stopped = worker.stop(); // the drain the signal started
  openGate();
  await stopped;
  expect(worker.health()).toEqual({ healthy: false, problems: ['stopped'] });
  expect(await client.get(executionId)).toMatchObject({ status: 'Completed', result: { aborted: false } });
}, 30_000);

it('refuses options it does not understand, naming them, before connecting', async () => {
  await expect(startWorker({ databaseUrl: db.url, actions: [slow], capacty: 3 } as never)).rejects.toThrow(/^options\.capacty: unknown option; did you mean "capacity"\?/);
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
    const taken = startWorker({ databaseUrl: db.url, actions: [slow], id: 'one-id-twice', logger: silentLogger() });
    await expect(taken).rejects.toThrow(/^worker id "one-id-twice" is in use by a live worker \(pid \d+/);
    await expect(taken).rejects.toBeInstanceOf(WorkerIdInUseError);
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

it('refuses a bad id, a URL that is not one and a shutdown timeout a timer cannot hold, naming each option, before connecting', async () => {
  // Nothing listens there: a check made only after connecting would wait for it (bounded by the signal).
  const nowhere = 'postgres://postgres@127.0.0.1:1/nowhere';
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ id: 'a b' }, 'options.id', /^may contain only letters, digits and \. _ : -$/],
    [{ id: 'x'.repeat(201) }, 'options.id', /200/],
    [{ id: 7 }, 'options.id', /^must be a string of 1 to 200 letters, digits and \. _ : -$/],
    [{ shutdownTimeoutMs: 1e15 }, 'options.shutdownTimeoutMs', /^must be a whole number of ms from 0 to 604800000 \(7 days\)$/],
    [{ databaseUrl: 'nope' }, 'options.databaseUrl', /^Invalid url: expected postgres:\/\//],
    // Blank would read as unset: the embedded Postgres instead of the database asked for.
    [{ databaseUrl: ' ' }, 'options.databaseUrl', /^must not be empty$/],
    [{ natsUrl: 'http://127.0.0.1:4222' }, 'options.natsUrl', /^Invalid url: expected nats:\/\//],
    // QA: Postgres ends a name at a NUL, so this reached another database.
    [{ databaseUrl: 'postgres://postgres@127.0.0.1:5432/qa\u0000' }, 'options.databaseUrl', /^must not contain a NUL character/],
    [{ natsUrl: 'nats://127.0.0.1:4222\u0000' }, 'options.natsUrl', /^must not contain a NUL character/],
  ];
  for (const [given, path, message] of cases) {
    const err = await startWorker({ databaseUrl: nowhere, actions: [slow], logger: silentLogger(), signal: AbortSignal.timeout(3_000), ...given } as never).catch((e: unknown) => e);
    expect(err, JSON.stringify(given).slice(0, 80)).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).problems).toEqual([{ path, message: expect.stringMatching(message) }]);
  }
}, 40_000);

it('the errors starting it can throw are exported, from the root and /worker alike, and are the classes it throws', async () => {
  for (const [name, error] of Object.entries({ DatabaseNotMigratedError, DatabaseUnavailableError, DuplicateActionError, PortUnavailableError, WorkerIdInUseError })) {
    expect(typeof error, name).toBe('function');
    expect(root[name as keyof typeof root], name).toBe(error);
  }
  await expect(startWorker({ databaseUrl: db.url, actions: [slow, slow], logger: silentLogger() })).rejects.toBeInstanceOf(DuplicateActionError);
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  try {
    const metricsPort = (holder.address() as net.AddressInfo).port;
    await expect(startWorker({ databaseUrl: db.url, actions: [slow], metricsPort, logger: silentLogger() })).rejects.toBeInstanceOf(PortUnavailableError);
  } finally {
    await new Promise((resolve) => holder.close(resolve));
  }
  vi.stubEnv('BATON_DB_WAIT', '0'); // one try
  try {
    await expect(startWorker({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere', actions: [slow], logger: silentLogger() })).rejects.toBeInstanceOf(DatabaseUnavailableError);
  } finally {
    vi.unstubAllEnvs();
  }
}, 30_000);

it('refuses a worker with no action at all, and a signal already aborted, before taking an id or announcing anything', async () => {
  const announced = async () => (await db.pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'WorkerStarted'")).rows[0].n as number;
  const before = await announced();
  const none = await startWorker({ databaseUrl: db.url, actions: [], builtins: false, logger: silentLogger() }).catch((e: unknown) => e);
  expect(none).toBeInstanceOf(InvalidInputError);
  expect((none as InvalidInputError).problems).toEqual([{ path: 'options.actions', message: 'a worker needs at least one action: give one, or leave the built-ins on (builtins: false leaves them out)' }]);
  const aborted = await startWorker({ databaseUrl: db.url, actions: [slow], signal: AbortSignal.abort('shutting down'), logger: silentLogger() }).catch((e: unknown) => e);
  expect(aborted).toBeInstanceOf(InvalidInputError);
  expect((aborted as InvalidInputError).problems).toEqual([{ path: 'options.signal', message: 'is already aborted (shutting down): the worker was not started' }]);
  expect(await announced()).toBe(before);
});

it('its signal aborting while it waits for the database stops the wait, saying so and naming options.databaseUrl', async () => {
  // Aborted once the wait has begun: when the worker logs that it waits.
  let waiting!: () => void;
  const waits = new Promise<void>((resolve) => (waiting = resolve));
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (chunk.toString().includes('waiting for Postgres')) waiting();
      done();
    },
  });
  const ac = new AbortController();
  const started = startWorker({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere', actions: [slow], signal: ac.signal, logger: pino({ level: 'warn' }, logs) }).catch((e: unknown) => e);
  await waits;
  ac.abort('deploy');
  const err = await started;
  expect(err).toBeInstanceOf(DatabaseUnavailableError);
  expect((err as Error).message).toMatch(
    /^cannot connect to Postgres at postgres:\/\/postgres@127\.0\.0\.1:1\/nowhere \(from options\.databaseUrl\): connect ECONNREFUSED [^;]* \(stopped waiting for it: the signal aborted\); is the server running and reachable\?$/,
  );
});
