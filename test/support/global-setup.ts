// Runs once per `vitest run`, in the main process. One Postgres server for the whole run;
// one template database migrated once; every test file then clones the template
// (CREATE DATABASE … TEMPLATE: milliseconds, where starting a server costs a second).
//
// Server: BATON_DATABASE_URL when set (CI: the machine's Postgres 15 on 5432), otherwise a
// throwaway embedded Postgres in a fresh dir under os.tmpdir() on a free port, fsync off.
// Fresh rather than a reused `.baton/test-postgres`: initdb --no-sync costs ~0.5 s here,
// and in exchange two concurrent runs never share (or stop) each other's server and no
// state survives from an earlier run. Dirs left by a run that was killed are swept below.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { connect as natsConnect } from 'nats';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config.ts';
import { loadTestHarnessConfig } from '../../src/config-test-harness.ts';
import { componentLogger, createLogger, type Logger } from '../../src/log.ts';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { redactUrl, urlForDatabase } from '../../src/db/connect.ts';
import { reapAbandonedEmbeddedPostgres, startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/db/embedded.ts';
import { freePort } from './free-port.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the run's Postgres server (its `postgres` database, or BATON_DATABASE_URL's). */
    pgBaseUrl: string;
    /** Name of the migrated template database that createTestDatabase() clones. */
    pgTemplate: string;
    /** Unique per run; test database names start with `baton_test_<runId>_`. */
    pgRunId: string;
    /** A NATS server with JetStream, or null when none is reachable (then NATS tests skip; BATON_REQUIRE_NATS=1 fails the run instead). */
    natsUrl: string | null;
  }
}

// test/integration/embedded.test.ts uses this prefix too, so its clusters are swept as well.
const TMP_PREFIX = 'baton-test-pg-';
// Databases of runs older than this on a shared server were left by killed runs.
const STALE_RUN_MS = 24 * 60 * 60 * 1000;

/** Time-ordered and parseable (stale-run sweeping reads the time back), plus a random tail. */
function newRunId(): string {
  return Date.now().toString(36).padStart(9, '0') + randomBytes(2).toString('hex').slice(0, 3);
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const config = loadConfig();
  const harness = loadTestHarnessConfig();
  const log = componentLogger(createLogger(config, { destination: 'stderr', pretty: false }), 'test-setup');
  // The embedded server's progress lines are noise in a test run unless someone asks for debug.
  const quiet = ['debug', 'trace'].includes(config.logLevel) ? log : log.child({}, { level: 'warn' });
  const runId = newRunId();
  const template = `baton_template_${runId}`;
  const t0 = performance.now();

  const natsUrl = await checkNats(harness.natsUrl, harness.requireNats);

  let embedded: EmbeddedPostgres | undefined;
  let embeddedDir: string | undefined;
  let baseUrl: string;
  await sweepAbandonedTmpClusters(quiet);
  if (config.databaseUrl) {
    baseUrl = config.databaseUrl;
  } else {
    embeddedDir = await fs.mkdtemp(path.join(os.tmpdir(), TMP_PREFIX));
    // As root the server runs as `postgres`, which must be able to enter this dir (mkdtemp makes it 0700).
    await fs.chmod(embeddedDir, 0o755);
    embedded = await startEmbeddedPostgres({
      dataDir: embeddedDir,
      port: await freePort(),
      log: quiet,
      database: 'postgres',
      ephemeral: true,
    });
    baseUrl = embedded.url;
  }

  const teardownServer = async () => {
    await embedded?.stop();
    if (embeddedDir) await fs.rm(embeddedDir, { recursive: true, force: true });
  };

  try {
    await withAdmin(baseUrl, async (admin) => {
      await dropStaleRuns(admin, quiet);
      await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(template)}`);
    });
    const pool = new pg.Pool({ connectionString: urlForDatabase(baseUrl, template), max: 2 });
    try {
      await migrateAll(pool);
    } finally {
      await pool.end();
    }
    // ALLOW_CONNECTIONS false: CREATE DATABASE … TEMPLATE fails while anyone is connected to
    // the template, so nobody (no test, no autovacuum) may connect to it from now on.
    await withAdmin(baseUrl, (admin) =>
      admin.query(`ALTER DATABASE ${admin.escapeIdentifier(template)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`),
    );
  } catch (err) {
    await dropRun(baseUrl, runId, template).catch(() => undefined);
    await teardownServer();
    throw err;
  }

  log.info(
    {
      postgres: embedded ? `embedded ${embedded.clusterDir} on 127.0.0.1:${embedded.port}` : `${redactUrl(baseUrl)} (BATON_DATABASE_URL)`,
      template,
      nats: natsUrl ?? 'unreachable (NATS tests skip)',
      eventstore: config.eventStoreUrl ? `${redactUrl(config.eventStoreUrl)} (BATON_EVENTSTORE_URL)` : 'BATON_EVENTSTORE_URL not set (EventStoreDB suite skips)',
      ms: Math.round(performance.now() - t0),
    },
    'test run ready',
  );

  project.provide('pgBaseUrl', baseUrl);
  project.provide('pgTemplate', template);
  project.provide('pgRunId', runId);
  project.provide('natsUrl', natsUrl);

  return async () => {
    try {
      await dropRun(baseUrl, runId, template);
    } finally {
      await teardownServer();
    }
  };
}

async function withAdmin<T>(baseUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: baseUrl, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw new Error(
      `test setup: cannot connect to Postgres at ${redactUrl(baseUrl)} ` +
        `(BATON_DATABASE_URL, or the embedded test server): ${(err as Error).message}`,
      { cause: err },
    );
  }
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Drop this run's test databases (left by files that crashed) and its template. */
async function dropRun(baseUrl: string, runId: string, template: string): Promise<void> {
  await withAdmin(baseUrl, async (admin) => {
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE $1`,
      [`baton\\_test\\_${runId}\\_%`],
    );
    for (const { datname } of rows) {
      await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(datname)} WITH (FORCE)`);
    }
    await dropTemplate(admin, template);
  });
}

async function dropTemplate(admin: pg.Client, template: string): Promise<void> {
  const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
  if (!rowCount) return;
  await admin.query(`ALTER DATABASE ${admin.escapeIdentifier(template)} WITH IS_TEMPLATE false`);
  await admin.query(`DROP DATABASE ${admin.escapeIdentifier(template)} WITH (FORCE)`);
}

/** On a shared server (BATON_DATABASE_URL), drop databases of runs that were killed a day or more ago. */
async function dropStaleRuns(admin: pg.Client, log: Logger): Promise<void> {
  const { rows } = await admin.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datname ~ '^baton_(test|template)_[0-9a-z]{12}(_|$)'`,
  );
  for (const { datname } of rows) {
    const started = parseInt(datname.replace(/^baton_(test|template)_/, '').slice(0, 9), 36);
    if (!(Date.now() - started > STALE_RUN_MS)) continue;
    log.warn({ database: datname }, 'dropping a database left by a test run that was killed');
    if (datname.startsWith('baton_template_')) await dropTemplate(admin, datname);
    else await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(datname)} WITH (FORCE)`);
  }
}

/** Remove embedded test clusters whose vitest process died without its teardown. */
async function sweepAbandonedTmpClusters(log: Logger): Promise<void> {
  const tmp = os.tmpdir();
  const entries = await fs.readdir(tmp).catch(() => [] as string[]);
  for (const name of entries.filter((n) => n.startsWith(TMP_PREFIX))) {
    const dir = path.join(tmp, name);
    const age = await fs.stat(dir).then((s) => Date.now() - s.mtimeMs, () => 0);
    if (age < 60_000) continue; // may be a concurrent run still setting up
    if ((await reapAbandonedEmbeddedPostgres(dir)) === 'abandoned') {
      log.warn({ dir }, 'removing an embedded test Postgres left by a test run that was killed');
      await fs.rm(dir, { recursive: true, force: true });
    }
  }
}


/** Reachable NATS with JetStream → its URL; otherwise null, or a failed run when BATON_REQUIRE_NATS=1. */
async function checkNats(url: string, required: boolean): Promise<string | null> {
  try {
    const nc = await natsConnect({ servers: url, timeout: 2_000, reconnect: false });
    try {
      await nc.jetstreamManager({ timeout: 2_000 });
    } catch (err) {
      throw new Error(`JetStream is not enabled there (start nats-server with -js): ${(err as Error).message}`, { cause: err });
    } finally {
      await nc.close();
    }
    return url;
  } catch (err) {
    if (!required) return null;
    throw new Error(
      `BATON_REQUIRE_NATS=1, but NATS at ${url} (BATON_NATS_URL) is not usable within 2 s: ${(err as Error).message}. ` +
        'Start it (nats-server -js), fix BATON_NATS_URL, or unset BATON_REQUIRE_NATS to skip the NATS tests.',
      { cause: err },
    );
  }
}
