// One database per test file (or per describe block), cloned from the run's migrated
// template (see global-setup.ts). Cloning costs milliseconds, so tests never share state.
//
//   const db = useTestDatabase();               // inside a describe block or at file level
//   it('…', async () => { await db().pool.query('…') });
//
// Leaks fail the file: drop() refuses to pass while any other session is still connected
// to the database (a pool or client a test forgot to end), and test/support/setup.ts fails
// the file if a database it created was never dropped.
import { connect } from 'nats';
import { deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { natsNamesOfInstallation } from '../../src/transport/nats/installation-names.ts';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { urlForDatabase } from '../../src/db/connect.ts';

export interface TestDatabase {
  /** `baton_test_<runId>_<random>` */
  name: string;
  /** Full URL, for code under test that opens its own pool (it must close it before drop()). */
  url: string;
  /** A pool owned by the harness; drop() ends it. */
  pool: pg.Pool;
  /**
   * Ends the pool and drops the database (WITH FORCE, so it never lingers). Rejects when some
   * other connection to it was still open: that is a leak in the test or the code under test.
   */
  drop(): Promise<void>;
}

export interface TestDatabaseOptions {
  /** Size of `pool`. Default 10. */
  max?: number;
}

const APPLICATION_NAME = 'baton-test-harness';
// After pool.end() resolves, the server takes a moment to retire those backends.
const LEAK_GRACE_MS = 2_000;

const open = new Map<TestDatabase, string>();

/**
 * The NATS streams of the installation this database became (BATON_WORK_<token> and its dead
 * letters: src/transport/nats/installation-names.ts), when something ran the NATS transport on
 * it: they would outlive the database on the shared server, one pair per test database per run.
 */
async function deleteNatsStreamsOf(pool: pg.Pool): Promise<void> {
  const natsUrl = process.env.BATON_NATS_URL;
  if (!natsUrl) return;
  // Only an id this database took for itself (a copy of the template has the template's until asked).
  const r = await pool.query<{ id: string }>('SELECT id::text AS id FROM baton_installation WHERE database_name = current_database()').catch(() => undefined);
  const id = r?.rows[0]?.id;
  if (!id) return;
  const nc = await connect({ servers: natsUrl, timeout: 2_000 }).catch(() => undefined);
  if (!nc) return;
  try {
    await deleteNatsWorkStreams(nc, natsNamesOfInstallation(id));
  } finally {
    await nc.close();
  }
}

export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const createdAt = callerOf(new Error().stack); // before any await, while the caller is on the stack
  const baseUrl = inject('pgBaseUrl');
  const template = inject('pgTemplate');
  const name = `baton_test_${inject('pgRunId')}_${randomBytes(4).toString('hex')}`;
  await withAdmin(baseUrl, (admin) =>
    admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)} TEMPLATE ${admin.escapeIdentifier(template)}`),
  );
  const url = urlForDatabase(baseUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10, application_name: APPLICATION_NAME });
  let dropping: Promise<void> | undefined;
  const db: TestDatabase = {
    name,
    url,
    pool,
    drop: () =>
      (dropping ??= (async () => {
        open.delete(db);
        await deleteNatsStreamsOf(pool);
        await pool.end();
        await withAdmin(baseUrl, async (admin) => {
          const leaked = await waitForNoSessions(admin, name);
          await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(name)} WITH (FORCE)`);
          if (leaked.length) {
            throw new Error(
              `test database ${name} still had ${leaked.length} open connection(s) when it was dropped: ` +
                `${leaked.join('; ')}. A test (or the code under test) left a pg.Pool/pg.Client open: ` +
                'end every pool and client you create (await pool.end() in afterAll/afterEach).',
            );
          }
        });
      })()),
  };
  open.set(db, createdAt);
  return db;
}

/**
 * A database for the enclosing describe block (or file): created in beforeAll, dropped in
 * afterAll. Call the returned getter inside tests and hooks.
 */
export function useTestDatabase(options: TestDatabaseOptions = {}): () => TestDatabase {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await createTestDatabase(options);
  });
  afterAll(async () => {
    const d = db;
    db = undefined;
    await d?.drop();
  });
  return () => {
    if (!db) throw new Error('useTestDatabase(): the database exists only inside the tests and hooks of the block that called it');
    return db;
  };
}

/**
 * Called after every test file (test/support/setup.ts): drops what the file forgot to drop,
 * then fails the file, naming where each forgotten database was created.
 */
export async function assertAllTestDatabasesDropped(): Promise<void> {
  if (open.size === 0) return;
  const forgotten = [...open.entries()];
  await Promise.allSettled(forgotten.map(([db]) => db.drop()));
  throw new Error(
    `${forgotten.length} test database(s) were never dropped (their pools stayed open): ` +
      forgotten.map(([db, where]) => `${db.name} created at ${where}`).join('; ') +
      '. Call drop() in afterAll, or use useTestDatabase().',
  );
}

async function waitForNoSessions(admin: pg.Client, name: string): Promise<string[]> {
  const deadline = Date.now() + LEAK_GRACE_MS;
  for (;;) {
    const { rows } = await admin.query<{ pid: number; application_name: string; state: string | null; query: string }>(
      `SELECT pid, application_name, state, left(query, 80) AS query FROM pg_stat_activity
        WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      [name],
    );
    if (rows.length === 0) return [];
    if (Date.now() > deadline) {
      return rows.map((r) => `pid ${r.pid} (${r.application_name || 'no application_name'}, ${r.state ?? '?'}, last query: ${JSON.stringify(r.query)})`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function withAdmin<T>(baseUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: baseUrl, application_name: APPLICATION_NAME });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** The first stack frame outside this file: where a test created its database. */
function callerOf(stack: string | undefined): string {
  const frame = stack
    ?.split('\n')
    .slice(1)
    .find((l) => !l.includes('/test/support/test-db.ts') && !l.includes('node:internal') && !l.includes('node_modules'));
  return frame?.trim().replace(/^at /, '') ?? '(unknown)';
}
