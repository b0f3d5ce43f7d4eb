// The database plumbing everything else stands on: migrations, test databases, openDatabase.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { DatabaseUnavailableError, openDatabase } from '../../src/db/connect.ts';
import { applyMigrations, MigrationError, type MigrationSet } from '../../src/db/migrate.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestDatabase, useTestDatabase } from '../support/test-db.ts';

let scratch: string;
beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-migrations-'));
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

/** A migration set in a fresh directory: { '0001_a.sql': 'CREATE TABLE …' }. */
async function migrationSet(name: string, files: Record<string, string>): Promise<MigrationSet> {
  const dir = await fs.mkdtemp(path.join(scratch, `${name}-`));
  for (const [file, sql] of Object.entries(files)) await fs.writeFile(path.join(dir, file), sql);
  return { name, dir: pathToFileURL(`${dir}/`) };
}

const tables = async (pool: pg.Pool) =>
  (await pool.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)).rows.map(
    (r) => r.t,
  );

describe('applyMigrations', () => {
  const db = useTestDatabase();

  it('applies each file once, in file-name order; a second run applies nothing', async () => {
    const set = await migrationSet('once', {
      '0002_b.sql': 'ALTER TABLE once_a ADD COLUMN b int;',
      '0001_a.sql': 'CREATE TABLE once_a (id int);\nCREATE INDEX ON once_a (id);',
      'README.md': 'not a migration',
    });
    expect(await applyMigrations(db().pool, [set])).toEqual(['once/0001_a', 'once/0002_b']);
    expect(await applyMigrations(db().pool, [set])).toEqual([]);
    const { rows } = await db().pool.query(
      `SELECT id, length(checksum) AS len FROM baton_schema_migrations WHERE set_name = 'once' ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: '0001_a', len: 64 },
      { id: '0002_b', len: 64 },
    ]);
  });

  it('is safe when three processes migrate the same database at once', async () => {
    const set = await migrationSet('race', {
      // pg_sleep widens the window in which an unserialized runner would apply a file twice.
      '0001_a.sql': 'SELECT pg_sleep(0.2); CREATE TABLE race_a (id int);',
      '0002_b.sql': 'CREATE TABLE race_b (id int);',
      '0003_c.sql': 'INSERT INTO race_a VALUES (1);',
    });
    const pools = [1, 2, 3].map(() => new pg.Pool({ connectionString: db().url, max: 1 }));
    try {
      const results = await Promise.all(pools.map((p) => applyMigrations(p, [set])));
      expect(results.flat().sort()).toEqual(['race/0001_a', 'race/0002_b', 'race/0003_c']);
      expect((await db().pool.query('SELECT count(*)::int AS n FROM race_a')).rows[0].n).toBe(1);
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('refuses to run when an applied file was edited, naming the file', async () => {
    const set = await migrationSet('edited', { '0001_a.sql': 'CREATE TABLE edited_a (id int);' });
    await applyMigrations(db().pool, [set]);
    await fs.writeFile(new URL('0001_a.sql', set.dir), 'CREATE TABLE edited_a (id bigint);');
    const err = await applyMigrations(db().pool, [set]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MigrationError);
    expect((err as Error).message).toMatch(/0001_a\.sql.*changed after it was applied/);
  });

  it('rolls back a failing file (and records nothing), naming the file and line', async () => {
    const set = await migrationSet('broken', {
      '0001_ok.sql': 'CREATE TABLE broken_ok (id int);',
      '0002_bad.sql': 'CREATE TABLE broken_half (id int);\nSELECT * FROM no_such_table;',
    });
    const err = await applyMigrations(db().pool, [set]).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/0002_bad\.sql.*failed at line 2.*no_such_table/);
    expect(await tables(db().pool)).toContain('broken_ok');
    expect(await tables(db().pool)).not.toContain('broken_half');
    const { rows } = await db().pool.query(`SELECT id FROM baton_schema_migrations WHERE set_name = 'broken'`);
    expect(rows).toEqual([{ id: '0001_ok' }]);
  });

  it('rejects file names without a number and numbers used twice', async () => {
    const unnumbered = await migrationSet('names1', { 'add_table.sql': 'SELECT 1;' });
    await expect(applyMigrations(db().pool, [unnumbered])).rejects.toThrow(/add_table\.sql must be named <number>_<name>\.sql/);
    const twice = await migrationSet('names2', { '0001_a.sql': 'SELECT 1;', '0001_b.sql': 'SELECT 1;' });
    await expect(applyMigrations(db().pool, [twice])).rejects.toThrow(/0001_a\.sql and 0001_b\.sql share the number 0001/);
  });
});

describe('migrateAll on a current database', () => {
  const db = useTestDatabase();

  it('checks without the migration lock: returns [] while another process holds it', async () => {
    // Every CLI command opens the database: a current one must cost a query, not the locked
    // pass (which waits for whoever holds the lock and takes a round trip per migration set).
    const holder = await db().pool.connect();
    try {
      await holder.query(`SELECT pg_advisory_lock(hashtextextended('baton_schema_migrations', 0))`);
      await holder.query('BEGIN');
      await holder.query(`SELECT pg_advisory_xact_lock(hashtextextended('baton_read_model', 0))`);
      const timedOut = new Promise<'blocked'>((resolve) => setTimeout(() => resolve('blocked'), 3_000).unref());
      expect(await Promise.race([migrateAll(db().pool), timedOut])).toEqual([]);
    } finally {
      await holder.query('ROLLBACK');
      await holder.query(`SELECT pg_advisory_unlock_all()`);
      holder.release();
    }
  });

  it('still finds what is missing: a dropped read-model checkpoint makes it create that projection again', async () => {
    await db().pool.query(`DELETE FROM baton_projection_checkpoints WHERE projection = 'workers'`);
    await db().pool.query(`DROP TABLE baton_read.workers`);
    expect(await migrateAll(db().pool)).toEqual(['read-model/workers']);
    expect(await migrateAll(db().pool)).toEqual([]);
  });
});

describe('test databases', () => {
  it('are clones of the migrated template, isolated from each other', async () => {
    const [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    try {
      expect(a.name).not.toBe(b.name);
      // The template was migrated once in global setup: nothing is left to apply here.
      expect(await migrateAll(a.pool)).toEqual([]);
      expect(await tables(a.pool)).toContain('baton_schema_migrations');
      await a.pool.query('CREATE TABLE only_in_a (id int)');
      expect(await tables(a.pool)).toContain('only_in_a');
      expect(await tables(b.pool)).not.toContain('only_in_a');
    } finally {
      await Promise.all([a.drop(), b.drop()]);
    }
  });

  it('drop() fails when a connection was left open (and still drops the database)', async () => {
    const db = await createTestDatabase();
    const leaked = new pg.Client({ connectionString: db.url, application_name: 'leaky-test' });
    leaked.on('error', () => undefined); // DROP … WITH (FORCE) terminates it
    await leaked.connect();
    await expect(db.drop()).rejects.toThrow(/still had 1 open connection.*leaky-test/);
    await leaked.end().catch(() => undefined);
    const admin = new pg.Client({ connectionString: inject('pgBaseUrl') });
    await admin.connect();
    try {
      const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
      expect(rowCount).toBe(0);
    } finally {
      await admin.end();
    }
  });
});

describe('openDatabase', () => {
  const db = useTestDatabase();

  it('opens BATON_DATABASE_URL, migrates it, and closes', async () => {
    const config = loadConfig({ BATON_DATABASE_URL: db().url });
    const opened = await openDatabase(config, silentLogger());
    try {
      expect(opened.embedded).toBe(false);
      expect((await opened.pool.query('SELECT current_database() AS d')).rows[0].d).toBe(db().name);
      expect(await tables(opened.pool)).toContain('baton_schema_migrations');
    } finally {
      await opened.close();
      await opened.close(); // idempotent
    }
  });

  it('keeps an idle connection past the 10 s after which node-postgres would close it (src/db/pool-settings.ts)', { timeout: 30_000 }, async () => {
    const opened = await openDatabase(loadConfig({ BATON_DATABASE_URL: db().url }), silentLogger());
    const backend = async () => (await opened.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    try {
      const before = await backend();
      await new Promise((r) => setTimeout(r, 11_000));
      expect(opened.pool.totalCount).toBeGreaterThan(0);
      // The same server process: the next query found its connection open, not a new one.
      expect(await backend()).toBe(before);
    } finally {
      await opened.close();
    }
  });

  it('names the URL without its password, and the variable, when the server is unreachable', async () => {
    // One try: waiting for the server is test/integration/db-wait.test.ts's subject.
    const config = loadConfig({ BATON_DATABASE_URL: 'postgres://baton:s3cret@127.0.0.1:1/baton', BATON_DB_WAIT: '0' });
    const err = await openDatabase(config, silentLogger()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseUnavailableError);
    const message = (err as Error).message;
    expect(message).toContain('postgres://baton:***@127.0.0.1:1/baton');
    expect(message).toContain('BATON_DATABASE_URL');
    expect(message).not.toContain('s3cret');
  });
});
