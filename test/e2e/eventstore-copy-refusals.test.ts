// `baton eventstore copy` as a user runs it (real processes), where it used to go wrong:
// BATON_DB_SCHEMA is refused (it copied the public schema's installation and said nothing), a
// schema's installation is copied by naming it in each URL, and a --checkpoint it cannot use
// (empty, a device, a pipe, a directory, huge, under /proc) is refused at once, naming it,
// before anything is copied: no hang, no "Invalid string length", no EISDIR.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { createSchemaPool } from '../../src/db/db-schema.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let scratch: string;
let source: TestDatabase;
let target: TestDatabase;
const EVENTS = 5;

/** The URL of `schema`'s installation in `db`, as the README shows it. */
const inSchema = (db: TestDatabase, schema: string) => `${db.url}?options=-c%20search_path%3D${schema}`;

/** The events of `schema`'s installation in `db`, through a pool of that installation. */
async function eventsIn(db: TestDatabase, schema: string): Promise<string[]> {
  const pool = createSchemaPool({ connectionString: db.url, max: 1 }, schema);
  try {
    return (await pool.query<{ event_id: string }>('SELECT event_id FROM baton_events ORDER BY global_position')).rows.map((r) => r.event_id);
  } finally {
    await pool.end();
  }
}

const copy = (args: string[], env: Record<string, string> = {}): Promise<CliResult> =>
  runBaton(['eventstore', 'copy', ...args], { databaseUrl: null, env: { BATON_DATA_DIR: scratch, ...env } });
// For refusals made before any store is opened: nothing listens there, so reaching a store would say so instead.
const unreachable = ['--from', 'postgres://baton@127.0.0.1:1/none', '--to', 'postgres://baton@127.0.0.1:1/other'];

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-copy-refusals-'));
  [source, target] = await Promise.all([createTestDatabase({ max: 2 }), createTestDatabase({ max: 2 })]);
  // An installation in schema tenant1 of the source database, holding a few events.
  const pool = createSchemaPool({ connectionString: source.url, max: 2 }, 'tenant1');
  try {
    await migrateAll(pool);
    const store = createPostgresEventStore(pool);
    await store.append('copytest-1', Array.from({ length: EVENTS }, (_, n) => ({ eventId: randomUUID(), type: 'ThingNoted', data: { n }, metadata: { by: 'executor' } })), { expectedRevision: 'no_stream' });
    await store.close();
  } finally {
    await pool.end();
  }
});
afterAll(async () => {
  await Promise.all([source?.drop(), target?.drop()]);
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('baton eventstore copy and BATON_DB_SCHEMA', () => {
  it('refuses BATON_DB_SCHEMA, saying the URLs name the stores and how to name a schema in one; nothing is copied', async () => {
    const r = await copy(['--from', source.url, '--to', target.url], { BATON_DB_SCHEMA: 'tenant1' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "baton: BATON_DB_SCHEMA is set (tenant1), but eventstore copy does not read it: it copies the stores the --from and --to URLs name. Unset it, and name a schema's installation in the URL of its side, " +
        "e.g. --from 'postgres://user@host:5432/db?options=-c%20search_path%3Dtenant1' (--to the same way)\n",
    );
    expect(await fs.readdir(scratch)).toEqual([]); // not even a checkpoint
    expect(Number((await target.pool.query('SELECT count(*) AS n FROM baton_events')).rows[0].n)).toBe(0);
  });

  it("copies one schema's installation into another's when each URL names its schema; the target's read model is its own", async () => {
    const r = await copy(['--from', inSchema(source, 'tenant1'), '--to', inSchema(target, 'tenant2'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ read: EVENTS, appended: EVENTS, complete: true });
    expect(await eventsIn(target, 'tenant2')).toEqual(await eventsIn(source, 'tenant1'));
    // Made by the migrations for tenant2 (the schema was missing), not left in baton_read, the public installation's.
    const made = await target.pool.query<{ read: string | null }>("SELECT to_regclass('tenant2_read.executions')::text AS read");
    expect(made.rows[0]!.read).toBe('tenant2_read.executions');
    expect(Number((await target.pool.query('SELECT count(*) AS n FROM public.baton_events')).rows[0].n)).toBe(0);
  });

  it('refuses a search_path that is not one schema, naming the option', async () => {
    const r = await copy(['--from', `${source.url}?options=-c%20search_path%3Dtenant1,public`, '--to', target.url]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^baton: --from: options="-c search_path=tenant1,public": a search_path must be given alone as -c search_path=<schema>, one schema/);
  });
});

describe('baton eventstore copy --checkpoint it cannot use', () => {
  it("refuses an empty path, as --archive '' is refused", async () => {
    const r = await copy([...unreachable, '--checkpoint', '']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/option '--checkpoint <file>' argument '' is invalid\. must be a file path/);
  });

  it('refuses a directory and a file far bigger than a checkpoint, saying why', async () => {
    const big = path.join(scratch, 'big.json');
    await fs.writeFile(big, ' '.repeat(1024 * 1024 + 1));
    const [dir, huge] = await Promise.all([copy([...unreachable, '--checkpoint', scratch]), copy([...unreachable, '--checkpoint', big])]);
    expect(dir.code).toBe(1);
    expect(dir.stderr).toBe(`baton: --checkpoint: ${scratch} is not a regular file (a directory); give the path of a checkpoint file\n`);
    expect(huge.code).toBe(1);
    expect(huge.stderr).toBe(`baton: --checkpoint: ${big} holds 1,048,577 bytes, more than a copy checkpoint ever does (at most 1 MiB); pass another --checkpoint file\n`);
  });

  // Linux devices and /proc; skipped where they do not exist.
  it.skipIf(!existsSync('/dev/full') || !existsSync('/proc/self'))('refuses a device, a pipe and a place under /proc at once, before copying anything (skipped without /dev/full and /proc)', async () => {
    const fifo = path.join(scratch, 'pipe');
    execFileSync('mkfifo', [fifo]);
    const [device, pipe, proc] = await Promise.all([
      copy([...unreachable, '--checkpoint', '/dev/full']),
      copy([...unreachable, '--checkpoint', fifo]), // reading it waited for a writer for ever
      // Real stores: the old code copied a batch, then spun in mkdir for ever.
      copy(['--from', inSchema(source, 'tenant1'), '--to', inSchema(target, 'tenant3'), '--checkpoint', '/proc/baton-qa/cp.json']),
    ]);
    expect(device.code).toBe(1);
    expect(device.stderr).toBe('baton: --checkpoint: /dev/full is not a regular file (a device, pipe or socket); give the path of a checkpoint file\n');
    expect(pipe.code).toBe(1);
    expect(pipe.stderr).toBe(`baton: --checkpoint: ${fifo} is not a regular file (a device, pipe or socket); give the path of a checkpoint file\n`);
    expect(proc.code).toBe(1);
    expect(proc.stderr).toMatch(/^baton: --checkpoint: cannot write \/proc\/baton-qa\/cp\.json: ENOENT: no such file or directory, mkdir '\/proc\/baton-qa'\n$/);
    expect((await target.pool.query("SELECT to_regclass('tenant3.baton_events') AS t")).rows[0].t).toBeNull(); // the target was not even opened
  });
});
