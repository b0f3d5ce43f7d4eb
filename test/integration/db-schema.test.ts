// BATON_DB_SCHEMA: two Baton installations in two schemas of one database never see each
// other. Each gets its own pool (search_path at its schema), migrations, runtime, projector
// and API; executions submitted through one are invisible to the other, in the event store,
// the read model and the API, and neither hears the other's LISTEN/NOTIFY wake-ups.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, type ApiServer } from '../../src/api/server.ts';
import { migrateAll } from '../../src/db/all-migrations.ts';
import { channelOf, createSchemaPool, readModelSchemaOf } from '../../src/db/db-schema.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { actions, gql, log } from '../api/api-harness.ts';
import { catchUpFully } from '../support/read-model.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

interface Installation {
  schema: string;
  pool: pg.Pool;
  store: PostgresEventStore;
  api: ApiServer;
}

const SUBMIT = `mutation { submitExecution(action: "core.noop") { executionId } }`;
const LIST = `{ executions(first: 100) { edges { node { id } } } }`;
const ONE = `query($id: ID!) { execution(id: $id) { id } }`;

describe('two installations in two schemas of one database', () => {
  let db: TestDatabase;
  const installations: Installation[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    for (const schema of ['s1', 's2']) {
      const pool = createSchemaPool({ connectionString: db.url, max: 6 }, schema);
      await migrateAll(pool);
      const store = createPostgresEventStore(pool);
      const api = await startApiServer({ pool, runtime: createExecutionRuntime(store), store, actions, log, port: 0 });
      installations.push({ schema, pool, store, api });
    }
  });
  afterAll(async () => {
    for (const i of installations) {
      await i.api.close();
      await i.store.close();
      await i.pool.end();
    }
    await db?.drop();
  });

  it('creates each installation\'s tables in its own schema, the read model beside it', async () => {
    const r = await db.pool.query<{ schema: string }>(
      `SELECT DISTINCT table_schema AS schema FROM information_schema.tables WHERE table_name IN ('baton_events', 'baton_schema_migrations', 'executions') ORDER BY 1`,
    );
    expect(r.rows.map((row) => row.schema)).toEqual(expect.arrayContaining(['s1', 's1_read', 's2', 's2_read']));
    expect(installations.map((i) => readModelSchemaOf(i.pool))).toEqual(['s1_read', 's2_read']);
  });

  it('executions submitted in one are invisible to the other', async () => {
    const [one, two] = installations as [Installation, Installation];
    const a = (await gql(one.api.url, SUBMIT)).data!.submitExecution.executionId as string;
    const b = (await gql(two.api.url, SUBMIT)).data!.submitExecution.executionId as string;
    await catchUpFully(one.pool, one.store);
    await catchUpFully(two.pool, two.store);

    const listed = async (i: Installation) => ((await gql(i.api.url, LIST)).data!.executions.edges as { node: { id: string } }[]).map((e) => e.node.id);
    expect(await listed(one)).toEqual([a]);
    expect(await listed(two)).toEqual([b]);
    expect((await gql(one.api.url, ONE, { id: b })).data!.execution).toBeNull();
    expect((await gql(two.api.url, ONE, { id: a })).data!.execution).toBeNull();
    expect(await one.store.readStream(`execution-${b}`)).toEqual([]);
    expect(await two.store.readStream(`execution-${a}`)).toEqual([]);
    // The database's default schema holds neither.
    const inPublic = await db.pool.query(`SELECT count(*)::int AS n FROM public.baton_events WHERE stream_id = ANY($1)`, [[`execution-${a}`, `execution-${b}`]]);
    expect(inPublic.rows[0].n).toBe(0);
  });

  it('LISTEN/NOTIFY wake-ups do not cross', async () => {
    const [one, two] = installations as [Installation, Installation];
    expect(channelOf(one.pool, 'baton_events')).toBe('baton_events_s1');
    const heard: string[] = [];
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    try {
      listener.on('notification', (msg) => heard.push(msg.channel));
      await listener.query('LISTEN baton_events_s1');
      await listener.query('LISTEN baton_events_s2');
      await gql(two.api.url, SUBMIT); // its event store NOTIFYs after the append commits
      const until = Date.now() + 5_000;
      while (!heard.includes('baton_events_s2') && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(heard).toContain('baton_events_s2');
      expect(heard).not.toContain('baton_events_s1');
    } finally {
      await listener.end();
    }
  });
});
