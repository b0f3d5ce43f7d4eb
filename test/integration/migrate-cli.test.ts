// `baton migrate [--check]` and BATON_MIGRATE=off: a deployment migrates once, as a role that may
// create tables, and runs its hosts as one that may not. Each test works in a schema of its own
// (BATON_DB_SCHEMA), fresh as a new database is.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { DatabaseNotMigratedError, createClient } from '@baton-run/baton';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const roles: string[] = [];
afterAll(async () => {
  for (const role of roles) {
    await db().pool.query(`DROP OWNED BY ${role}`);
    await db().pool.query(`DROP ROLE ${role}`);
  }
});

const freshSchema = () => `mig_${randomBytes(4).toString('hex')}`;
const tableCount = async (schema: string) =>
  (await db().pool.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = $1', [schema])).rows[0]!.n;

describe('baton migrate', () => {
  it('--check lists what is pending and exits 1; BATON_MIGRATE=off refuses the database naming `baton migrate`, writing nothing; migrate applies it all', async () => {
    const env = { BATON_DB_SCHEMA: freshSchema() };
    const check = await runBaton(['migrate', '--check', '--json'], { databaseUrl: db().url, env });
    expect(check.code, check.stderr).toBe(1);
    const { pending, schema } = JSON.parse(check.stdout) as { pending: string[]; schema: string };
    expect(schema).toBe(env.BATON_DB_SCHEMA); // a mistyped schema is another installation: said
    expect(pending).toContain('eventstore/0001_events');
    expect(pending).toContain('read-model/executions');

    const refused = await runBaton(['list'], { databaseUrl: db().url, env: { ...env, BATON_MIGRATE: 'off' } });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/is not migrated for this build of Baton \(pending: eventstore\/0001_events, .* and \d+ more\), and BATON_MIGRATE=off keeps this process from migrating it: run `baton migrate`/);
    expect(await tableCount(env.BATON_DB_SCHEMA)).toBe(0);
    // A host refuses it too, at once: it does not wait for it as for a database that is down.
    const host = await runBaton(['executor', '--metrics-port', '0'], { databaseUrl: db().url, env: { ...env, BATON_MIGRATE: 'off' } });
    expect(host.code).toBe(1);
    expect(host.stderr).toContain('run `baton migrate`');

    const applied = await runBaton(['migrate'], { databaseUrl: db().url, env });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain(`, schema ${env.BATON_DB_SCHEMA} (BATON_DB_SCHEMA): applied ${pending.length} migrations:\n  eventstore/0001_events\n`);
    const again = await runBaton(['migrate', '--check'], { databaseUrl: db().url, env });
    expect(again).toMatchObject({ code: 0, stdout: expect.stringMatching(/is up to date: nothing to apply\n$/) });
    expect((await runBaton(['migrate'], { databaseUrl: db().url, env })).stdout).toMatch(/is up to date: nothing to apply\n$/);
  });

  it('once migrated, a role that may not create tables submits and reads with BATON_MIGRATE=off', async () => {
    const schema = freshSchema();
    expect((await runBaton(['migrate'], { databaseUrl: db().url, env: { BATON_DB_SCHEMA: schema } })).code).toBe(0);
    const role = `baton_app_${randomBytes(4).toString('hex')}`;
    roles.push(role);
    const pool = db().pool;
    await pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'app-password'`);
    for (const s of [schema, `${schema}_read`]) {
      await pool.query(`GRANT USAGE ON SCHEMA ${s} TO ${role}`);
      await pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${s} TO ${role}`);
      await pool.query(`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${s} TO ${role}`);
    }
    const url = Object.assign(new URL(db().url), { username: role, password: 'app-password' }).toString();
    const env = { BATON_DB_SCHEMA: schema, BATON_MIGRATE: 'off' };
    const submitted = await runBaton(['submit', 'core.noop', '--json'], { databaseUrl: url, env });
    expect(submitted.code, submitted.stderr).toBe(0);
    const { executionId } = JSON.parse(submitted.stdout) as { executionId: string };
    const status = await runBaton(['status', executionId, '--json'], { databaseUrl: url, env });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'Requested' });
    // The same role with migrations on: the database is current, so it is not asked to create anything.
    expect((await runBaton(['status', executionId], { databaseUrl: url, env: { BATON_DB_SCHEMA: schema } })).code).toBe(0);
  });

  it('the library refuses it too: createClient({ databaseUrl }) with BATON_MIGRATE=off throws DatabaseNotMigratedError, listing what is pending', async () => {
    const saved = { BATON_MIGRATE: process.env.BATON_MIGRATE, BATON_DB_SCHEMA: process.env.BATON_DB_SCHEMA };
    Object.assign(process.env, { BATON_MIGRATE: 'off', BATON_DB_SCHEMA: freshSchema() });
    try {
      const err = await createClient({ databaseUrl: db().url }).then(
        (c) => c.close().then(() => 'opened'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DatabaseNotMigratedError);
      expect((err as DatabaseNotMigratedError).pending).toContain('liveness/0001_liveness');
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe('a command that only reads, in an installation that does not exist', () => {
  it('is refused naming BATON_DB_SCHEMA and the installations there, and creates nothing; a submission creates it', async () => {
    const env = { BATON_DB_SCHEMA: freshSchema() };
    const schemaExists = async () => (await db().pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [env.BATON_DB_SCHEMA])).rowCount === 1;
    for (const args of [['status', '01a2a2a2-0000-7000-8000-000000000000'], ['list'], ['events', '01a2a2a2-0000-7000-8000-000000000000']]) {
      const r = await runBaton(args, { databaseUrl: db().url, env });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^baton: BATON_DB_SCHEMA: no Baton installation in schema "${env.BATON_DB_SCHEMA}" of .*: nothing to read there \\(this command creates none\\); `));
    }
    expect(await schemaExists()).toBe(false);
    const submitted = await runBaton(['submit', 'core.noop', '--json'], { databaseUrl: db().url, env });
    expect(submitted.code, submitted.stderr).toBe(0);
    expect(await schemaExists()).toBe(true);
    expect((await runBaton(['list'], { databaseUrl: db().url, env })).code).toBe(0);
  });
});
