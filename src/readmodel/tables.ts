// Where a projection's tables live. The live read model is one schema (baton_read); a rebuild
// builds aside in its own schema and swaps the finished tables in; verify builds into a
// scratch schema and compares. The same DDL creates them anywhere (search_path decides).
import fs from 'node:fs/promises';
import pg from 'pg';
import { projections, type Projection } from '../../projections/index.ts';
import type { EventSource } from '../../projections/projection.ts';
import { relationKind } from '../../projections/rows.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { BatonError } from '../errors.ts';

const ddlCache = new Map<string, string>();
async function ddlOf(p: Projection): Promise<string> {
  let sql = ddlCache.get(p.name);
  if (sql === undefined) ddlCache.set(p.name, (sql = await fs.readFile(p.ddl, 'utf8')));
  return sql;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
export function checkSchemaName(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) throw new BatonError(`schema name "${schema}" must match ${SCHEMA_NAME}`);
  return schema;
}

/** Whether a projection's table is a view of the events (see Projection.storeView), given where the events are. */
export const formOf = (p: Projection, source: EventSource | undefined): 'view' | 'table' => (p.storeView && source ? 'view' : 'table');

/** What the live relation of a projection is now: its first table's kind in `schema`. */
export const liveFormOf = (client: pg.Pool | pg.ClientBase, schema: string, p: Projection) => relationKind(client, schema, p.tables[0]!.name);

/** Drop a projection's relations in `schema`, tables or views. */
export async function dropProjectionTables(client: pg.ClientBase, schema: string, p: Projection): Promise<void> {
  for (const t of p.tables) {
    const name = `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(t.name)}`;
    await client.query(t === p.tables[0] && (await liveFormOf(client, schema, p)) === 'view' ? `DROP VIEW ${name}` : `DROP TABLE IF EXISTS ${name}`);
  }
}

/**
 * Create a projection's tables in `schema` (which must exist), inside the caller's transaction:
 * from its DDL, or, where the events share this database (`source`) and it has a storeView, as
 * that view. A DELETE on the view deletes nothing: the events are the store's (retention removes
 * them there), never the read model's to remove.
 */
export async function createProjectionTables(client: pg.ClientBase, schema: string, p: Projection, source?: EventSource): Promise<void> {
  if (formOf(p, source) === 'view') {
    // Made before search_path moves: the events table is named as the pool's connections name it.
    const view = `${pg.escapeIdentifier(checkSchemaName(schema))}.${pg.escapeIdentifier(p.tables[0]!.name)}`;
    await client.query(`CREATE VIEW ${view} AS ${p.storeView!(source!.eventsTable)}`);
    await client.query(`CREATE RULE keep_events AS ON DELETE TO ${view} DO INSTEAD NOTHING`);
    return;
  }
  await client.query(`SET LOCAL search_path TO ${pg.escapeIdentifier(checkSchemaName(schema))}`);
  await client.query(await ddlOf(p));
  await client.query('SET LOCAL search_path TO DEFAULT');
}

export interface TransactionOptions {
  /**
   * false: COMMIT returns without waiting for its WAL to reach disk (synchronous_commit off for
   * this transaction only). For what can be derived again: a crash of Postgres may then take back
   * the last fraction of a second of such commits, each whole. No durable write can depend on one
   * taken back: WAL is flushed in order, so a writer that read it and then committed durably
   * flushed it too.
   */
  durable?: boolean;
}

/** Run `fn` in a transaction on one client; roll back on any error. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, o: TransactionOptions = {}): Promise<T> {
  const client = await pool.connect();
  try {
    // One round trip either way: the setting is LOCAL, so it ends with the transaction and never
    // reaches the pool's next user of this connection.
    await client.query(o.durable === false ? 'BEGIN; SET LOCAL synchronous_commit = off' : 'BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Whether every projection has its live tables (a checkpoint row): one query, no lock or transaction. */
export async function readModelReady(pool: pg.Pool): Promise<boolean> {
  return (await projectionsWithoutTables(pool)).length === 0;
}

/** The projections that have no live tables yet (no checkpoint row), by name: one query, no lock. */
export async function projectionsWithoutTables(pool: pg.Pool): Promise<string[]> {
  let known: Set<string>;
  try {
    const r = await pool.query<{ projection: string }>('SELECT projection FROM baton_projection_checkpoints');
    known = new Set(r.rows.map((row) => row.projection));
  } catch (err) {
    if ((err as { code?: string }).code !== '42P01') throw err;
    known = new Set(); // undefined_table: not migrated yet
  }
  return projections.filter((p) => !known.has(p.name)).map((p) => p.name);
}

// Serialises table creation between processes starting at once (dev, projector, api).
const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('baton_read_model', 0))`;

/**
 * Give every projection its live tables and checkpoint row, if it has none yet (a fresh
 * database, or a projection added in a new release). Existing tables are never touched here:
 * a projection whose version changed is rebuilt by the projector (aside, then swapped).
 */
export async function ensureReadModel(pool: pg.Pool): Promise<string[]> {
  return inTransaction(pool, async (client) => {
    await client.query(LOCK);
    const schema = readModelSchemaOf(pool);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(schema)}`);
    const r = await client.query<{ projection: string }>('SELECT projection FROM baton_projection_checkpoints');
    const known = new Set(r.rows.map((row) => row.projection));
    const created: string[] = [];
    for (const p of projections) {
      if (known.has(p.name)) continue;
      await createProjectionTables(client, schema, p);
      await client.query('INSERT INTO baton_projection_checkpoints (projection, version) VALUES ($1, $2)', [p.name, p.version]);
      created.push(p.name);
    }
    return created;
  });
}
