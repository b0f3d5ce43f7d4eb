// Hosts starting into a database that is not ready (real processes, real Postgres): they wait,
// saying why, and start working once it lets them in; what waiting cannot fix fails at once.
//
// "Full" is a role with CONNECTION LIMIT 0 (too many connections, SQLSTATE 53300, the same
// refusal as a server with no free slot; the machine's server is shared, so its
// max_connections is never exhausted here). "Not up yet" is a port nothing listens on until a
// TCP proxy to the real server opens there.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { urlForDatabase } from '../../src/db/connect.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { runBaton } from '../support/cli.ts';
import { freePort } from '../support/free-port.ts';
import { useTestDatabase } from '../support/test-db.ts';

const NATS_SERVER = ['/usr/sbin/nats-server', '/usr/local/bin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p)) ?? 'nats-server';
const db = useTestDatabase();
const role = `baton_wait_${randomBytes(4).toString('hex')}`;
let store: PostgresEventStore;
let roleUrl: string;
const admin = () => new pg.Pool({ connectionString: inject('pgBaseUrl'), max: 1 });
const hostEnv: Record<string, string> = { BATON_HEARTBEAT_INTERVAL: '500ms', BATON_SHUTDOWN_TIMEOUT: '2s' };
const { start, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: roleUrl, BATON_NATS_URL: '', ...hostEnv }));

beforeAll(async () => {
  store = createPostgresEventStore(db().pool);
  const a = admin();
  try {
    // Not a superuser (superusers ignore connection limits); a member of the test database's
    // owner so it may use Baton's tables.
    await a.query(`CREATE ROLE ${role} LOGIN PASSWORD 'wait' CONNECTION LIMIT 0`);
    await a.query(`GRANT ${(await a.query('SELECT current_user AS u')).rows[0].u} TO ${role}`);
  } finally {
    await a.end();
  }
  const u = new URL(urlForDatabase(inject('pgBaseUrl'), db().name));
  u.username = role;
  u.password = 'wait';
  roleUrl = u.toString();
});

afterAll(async () => {
  await killAll();
  await store?.close();
  const a = admin();
  try {
    await a.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]);
    await a.query(`DROP ROLE IF EXISTS ${role}`);
  } finally {
    await a.end();
  }
});

describe('a host starting into a database that refuses it', () => {
  it('waits while the server has no connection for it (too many connections), then starts and works', async () => {
    const executor = start('executor', ['executor', '--transport', 'postgres', '--metrics-port', '0']);
    const worker = start('worker', ['worker', '--id', `wait-${role}`, '--transport', 'postgres', '--metrics-port', '0']);
    await executor.waitFor(/waiting for Postgres at postgres:\/\/baton_wait_\w+:\*\*\*@[^ ]+: too many connections; retrying with backoff/, 20_000);
    await worker.waitFor(/too many connections/, 20_000);

    // Work submitted meanwhile waits in the store, as it did when the hosts exited instead.
    const runtime = createExecutionRuntime(store);
    const ids = await Promise.all(Array.from({ length: 20 }, () => runtime.submit({ action: 'core.noop' }).then((r) => r.executionId)));
    expect(executor.proc.exitCode).toBeNull();
    expect(worker.proc.exitCode).toBeNull();
    // Nothing announced while waiting: no liveness row, no WorkerStarted.
    expect((await db().pool.query('SELECT count(*)::int AS n FROM baton_worker_liveness')).rows[0].n).toBe(0);

    const a = admin();
    await a.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`).finally(() => a.end());
    const deadline = Date.now() + 30_000;
    for (;;) {
      const statuses = await Promise.all(ids.map(async (id) => (await runtime.load(id)).snapshot.value));
      if (statuses.every((s) => s === 'Completed')) break;
      if (Date.now() > deadline) throw new Error(`not all completed: ${statuses.join(', ')}\n${worker.output.join('').slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Each reason is logged once, not once per retry.
    expect(executor.output.join('').match(/too many connections; retrying/g)).toHaveLength(1);

    for (const c of [executor, worker]) c.proc.kill('SIGTERM');
    expect(await executor.exitWithin(20_000)).toBe(0);
    expect(await worker.exitWithin(20_000)).toBe(0);
  }, 90_000);

  it('waits for a server that is not listening yet (connection refused), then starts', async () => {
    const port = await freePort();
    const target = new URL(urlForDatabase(inject('pgBaseUrl'), db().name));
    const url = new URL(target);
    url.port = String(port);
    const executor = start('executor (refused)', ['executor', '--transport', 'postgres', '--metrics-port', '0'], {
      env: { BATON_DATABASE_URL: url.toString(), BATON_LOG_LEVEL: 'info' },
    });
    await executor.waitFor(/"reason":"connection refused[^"]*".*retrying with backoff \(waiting for good/, 20_000);
    expect(executor.proc.exitCode).toBeNull();

    // The server "comes up": a proxy to the real one opens on that port.
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => proxy.listen(port, '127.0.0.1', r));
    try {
      await executor.waitFor(/is available/, 20_000);
      await executor.waitFor(/executor running/, 20_000);
      executor.proc.kill('SIGTERM');
      expect(await executor.exitWithin(20_000)).toBe(0);
    } finally {
      proxy.close();
    }
  }, 60_000);

  it('waits for a NATS server that is not listening yet, as for its database, then starts (it used to exit 1 at once)', async () => {
    const port = await freePort();
    const executor = start('executor (NATS not up)', ['executor', '--transport', 'nats', '--metrics-port', '0'], {
      env: { BATON_DATABASE_URL: urlForDatabase(inject('pgBaseUrl'), db().name), BATON_NATS_URL: `nats://127.0.0.1:${port}`, BATON_LOG_LEVEL: 'info' },
    });
    await executor.waitFor(/waiting for NATS at nats:\/\/127\.0\.0\.1:\d+: connection refused[^"]*; retrying with backoff/, 20_000);
    expect(executor.proc.exitCode).toBeNull();
    const storeDir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-nats-wait-'));
    const nats = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
    try {
      await executor.waitFor(/NATS at nats:\/\/127\.0\.0\.1:\d+ is available/, 20_000);
      await executor.waitFor(/executor running/, 20_000);
      executor.proc.kill('SIGTERM');
      expect(await executor.exitWithin(20_000)).toBe(0);
    } finally {
      nats.kill('SIGKILL');
      await fs.rm(storeDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('stops at once, exit 0, when told to while still waiting', async () => {
    const port = await freePort();
    const worker = start('worker (stopped while waiting)', ['worker', '--transport', 'postgres', '--metrics-port', '0'], {
      env: { BATON_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/baton` },
    });
    await worker.waitFor(/connection refused/, 20_000);
    const t0 = Date.now();
    worker.proc.kill('SIGTERM');
    expect(await worker.exitWithin(10_000)).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
  }, 30_000);

  it('fails at once, with the reason, on what waiting cannot fix (a database that does not exist), even told to wait for good', async () => {
    const missing = urlForDatabase(inject('pgBaseUrl'), `${db().name}_missing`);
    const t0 = Date.now();
    const host = start('executor (missing db)', ['executor', '--transport', 'postgres', '--metrics-port', '0'], {
      env: { BATON_DATABASE_URL: missing, BATON_DB_WAIT: 'forever' },
    });
    expect(await host.exitWithin(20_000)).toBe(1);
    expect(Date.now() - t0).toBeLessThan(15_000);
    const out = host.output.join('');
    expect(out).toMatch(/^baton: cannot connect to Postgres at .*_missing \(from BATON_DATABASE_URL\): database ".*_missing" does not exist; create it first/m);
    expect(out).not.toMatch(/waiting for Postgres/);
  }, 30_000);

  it('gives a CLI command up after BATON_DB_WAIT, saying so', async () => {
    const port = await freePort();
    const t0 = Date.now();
    const r = await runBaton(['status', '00000000-0000-4000-8000-000000000000'], {
      databaseUrl: `postgres://postgres@127.0.0.1:${port}/baton`,
      env: { BATON_DB_WAIT: '1s' },
    });
    expect(r.code).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000);
    expect(r.stderr).toMatch(/baton: cannot connect to Postgres at postgres:\/\/postgres@127\.0\.0\.1:\d+\/baton \(from BATON_DATABASE_URL\): connect ECONNREFUSED .* \(gave up after 1 s; BATON_DB_WAIT sets how long to wait\)/);
  }, 30_000);
});
