// BATON_DB_SCHEMA: one Baton installation per Postgres schema. A pool opened for schema `s`
// sets `search_path` to `s` on each of its connections, so every unqualified table (event
// store, queue, liveness, migrations) lives in `s`; the read model lives in `s_read` instead of
// baton_read, and the LISTEN/NOTIFY channels (database-wide in Postgres) get the suffix `_s`.
// Two installations in two schemas of one database therefore share nothing but the server.
// The schema is a property of the pool (registered here when it is made), so one process may
// hold pools of several installations (tests do).
import pg from 'pg';

/** A schema name an installation may have (BATON_DB_SCHEMA; a URL's search_path): the one rule, used everywhere. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,29}$/;
const schemas = new WeakMap<pg.Pool, string>();

/** The live read model's schema when no BATON_DB_SCHEMA is set. */
export const DEFAULT_READ_MODEL_SCHEMA = 'baton_read';

/** Pool settings that put each connection's search_path at `schema` (nothing when undefined). */
export function schemaPoolConfig(schema: string | undefined): pg.PoolConfig {
  if (schema === undefined) return {};
  if (!SCHEMA_NAME.test(schema)) throw new Error(`BATON_DB_SCHEMA: "${schema}" must match ${SCHEMA_NAME}`);
  return { options: `-c search_path=${schema}` };
}

/** A pool for `schema` (undefined: Postgres's default search_path, public). */
export function createSchemaPool(config: pg.PoolConfig, schema: string | undefined): pg.Pool {
  const pool = new pg.Pool({ ...config, ...schemaPoolConfig(schema) });
  if (schema !== undefined) schemas.set(pool, schema);
  return pool;
}

/** Record that `pool`'s connections already have search_path at `schema` (a pool made elsewhere). */
export function registerPoolSchema(pool: pg.Pool, schema: string): void {
  schemas.set(pool, schema);
}

export const dbSchemaOf = (pool: pg.Pool): string | undefined => schemas.get(pool);

/** Where `pool`'s installation keeps its read model. */
export const readModelSchemaOf = (pool: pg.Pool): string => {
  const s = schemas.get(pool);
  return s === undefined ? DEFAULT_READ_MODEL_SCHEMA : `${s}_read`;
};

/** A LISTEN/NOTIFY channel of `pool`'s installation (channels are per database, not per schema). */
export const channelOf = (pool: pg.Pool, base: string): string => {
  const s = schemas.get(pool);
  return s === undefined ? base : `${base}_${s}`;
};

/** Create the pool's schema if it has one and it is missing: before the migrations, which create unqualified tables in it. */
export async function ensureDbSchema(pool: pg.Pool): Promise<void> {
  const s = schemas.get(pool);
  if (s !== undefined) await pool.query(`CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(s)}`);
}
