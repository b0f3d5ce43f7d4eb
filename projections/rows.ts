// Moving fold rows (camelCase, ISO-string times, numbers) in and out of Postgres in bulk:
// one jsonb parameter per batch, expanded by jsonb_populate_recordset, so a batch of any
// size is one statement and no SQL is ever built from values.
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';

// Names are few and come back for every row: each is converted once (a regex per key per row was
// ~5% of the projector's CPU in `baton bench`).
function memo(convert: (s: string) => string): (s: string) => string {
  const seen = new Map<string, string>();
  return (s) => {
    let out = seen.get(s);
    if (out === undefined) seen.set(s, (out = convert(s)));
    return out;
  };
}
export const snakeCase = memo((s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
export const camelCase = memo((s) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()));

/** `"schema"."table"`, quoted, for a schema name the projector chose. */
export const qualified = (schema: string, table: string) => `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}`;

/** What `schema.name` is now: a table, a view (the read model keeps both: src/readmodel/tables.ts), or nothing. */
export async function relationKind(client: pg.Pool | pg.ClientBase, schema: string, name: string): Promise<'view' | 'table' | undefined> {
  const r = await client.query<{ relkind: string }>(
    'SELECT c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2',
    [schema, name],
  );
  const kind = r.rows[0]?.relkind;
  return kind === undefined ? undefined : kind === 'v' ? 'view' : 'table';
}

/**
 * Fold rows → JSON objects keyed by `columns` (the rows' camelCase fields, snake_cased), built in
 * the columns' order, with no name lookup per field (a `for…in` with a lookup per key was 4% of
 * the projector's samples in `baton bench`). Null fields are left out: jsonb_populate_recordset
 * gives a missing key the same SQL NULL as a JSON null (jsonb columns included), and an executions
 * row is about half nulls, so the statement shrinks by ~30% (959 → 684 bytes per completed row).
 */
function toColumns(rows: readonly object[], columns: readonly string[]): Record<string, unknown>[] {
  const fields = columns.map((c) => [c, camelCase(c)] as const);
  return rows.map((row) => {
    const out: Record<string, unknown> = {};
    for (const [column, field] of fields) {
      const value = (row as Record<string, unknown>)[field];
      if (value !== null && value !== undefined) out[column] = value;
    }
    return out;
  });
}

/**
 * Database row → fold row: timestamps to ISO strings, bigints to numbers (counts and
 * durations stay far below 2^53), column names to camelCase.
 */
export function fromColumns<T>(dbRow: Record<string, unknown>, bigintColumns: readonly string[] = []): T {
  const out: Record<string, unknown> = {};
  for (const k in dbRow) {
    const v = dbRow[k];
    out[camelCase(k)] = v instanceof Date ? v.toISOString() : v !== null && bigintColumns.includes(k) ? Number(v) : v;
  }
  return out as T;
}

/** `INSERT … SELECT` of every row from one jsonb parameter, followed by `onConflict`. */
export async function insertRows(client: pg.ClientBase, table: string, columns: readonly string[], rows: readonly object[], onConflict: string): Promise<void> {
  if (rows.length === 0) return;
  const list = columns.map((c) => pg.escapeIdentifier(c)).join(', ');
  await client.query(
    `INSERT INTO ${table} (${list}) SELECT ${list} FROM jsonb_populate_recordset(NULL::${table}, $1::jsonb) ${onConflict}`,
    [JSON.stringify(toColumns(rows, columns))],
  );
}

/** Insert or replace whole rows, keyed by `key`, in one statement. */
export function upsertRows(client: pg.ClientBase, table: string, key: readonly string[], columns: readonly string[], rows: readonly object[]): Promise<void> {
  const updates = columns.filter((c) => !key.includes(c)).map((c) => `${pg.escapeIdentifier(c)} = EXCLUDED.${pg.escapeIdentifier(c)}`);
  return insertRows(client, table, columns, rows, `ON CONFLICT (${key.map((c) => pg.escapeIdentifier(c)).join(', ')}) DO UPDATE SET ${updates.join(', ')}`);
}

/**
 * Rows known to exist, each as it was (`before`) and as it is now (`after`), updated in place with
 * only what changed: one statement, whose SET is the union of the changed columns (a row sends
 * those of them that did not change as they are). Rows with nothing changed are not written. An
 * upsert of whole rows sent, parsed and stored again every column on every change, an execution's
 * input included (TOAST and all). Measured on the executions table and its indexes, 300 rows a
 * statement, an execution's update from requested to completed, inputs of random records: ~1.7 KB
 * 35.8 → 13.5 ms, ~18 KB 260 → 14.3 ms, none 13.9 → 12.2 ms. In `baton bench` (20,000
 * executions, alternated pairs): with ~2 KB inputs Postgres's CPU per execution 484–485 → 407–420
 * µs; without inputs no change beyond the noise. Returns the rows whose key was not there (a row
 * removed behind the caller's back): the caller writes those whole.
 */
export async function updateChangedColumns<T extends object>(
  client: pg.ClientBase,
  table: string,
  key: string,
  keyType: 'uuid' | 'text',
  columns: readonly string[],
  changes: readonly { before: T; after: T }[],
): Promise<T[]> {
  const keyField = camelCase(key);
  const fields = columns.filter((c) => c !== key).map((c) => [c, camelCase(c)] as const);
  const changed = new Set<string>();
  const rows: T[] = [];
  for (const { before, after } of changes) {
    let any = false;
    for (const [column, field] of fields) {
      if (isDeepStrictEqual((before as Record<string, unknown>)[field], (after as Record<string, unknown>)[field])) continue;
      changed.add(column);
      any = true;
    }
    if (any) rows.push(after);
  }
  if (rows.length === 0) return [];
  const set = columns.filter((c) => changed.has(c));
  const k = pg.escapeIdentifier(key);
  const updated = await client.query(
    `UPDATE ${table} AS t SET ${set.map((c) => `${pg.escapeIdentifier(c)} = r.${pg.escapeIdentifier(c)}`).join(', ')}
       FROM jsonb_populate_recordset(NULL::${table}, $1::jsonb) AS r WHERE t.${k} = r.${k}`,
    [JSON.stringify(toColumns(rows, [key, ...set]))],
  );
  if (updated.rowCount === rows.length) return [];
  // Rare: asked which are there, rather than having every update return its keys. Compared as
  // Postgres gives the key back: one written otherwise (an upper-case uuid) counts as gone and is
  // written whole, which is still right.
  const keys = rows.map((row) => String((row as Record<string, unknown>)[keyField]));
  const found = new Set((await selectRowsByKeys(client, table, key, keyType, keys)).map((row) => String(row[key])));
  return rows.filter((_, i) => !found.has(keys[i]!));
}

/** Insert rows; a row whose key already exists is left as it is (a replayed event). */
export function insertRowsIgnoringDuplicates(client: pg.ClientBase, table: string, columns: readonly string[], rows: readonly object[]): Promise<void> {
  return insertRows(client, table, columns, rows, 'ON CONFLICT DO NOTHING');
}

/**
 * Rows that should be new, inserted plainly (`insert`), inside a savepoint: if one exists after all
 * (a unique violation: a replayed event), that insert is undone and `fallback` (the ON CONFLICT
 * form) runs instead. Postgres's ON CONFLICT inserts speculatively, which cost here 470–535 ms per
 * 100,000 timeline rows against 284 ms for a plain INSERT. Inside the caller's transaction.
 */
export async function insertNewRows(client: pg.ClientBase, insert: () => Promise<unknown>, fallback: () => Promise<unknown>): Promise<void> {
  await client.query('SAVEPOINT baton_new_rows');
  try {
    await insert();
  } catch (err) {
    if ((err as { code?: string }).code !== '23505') throw err;
    await client.query('ROLLBACK TO SAVEPOINT baton_new_rows');
    await fallback();
  }
  await client.query('RELEASE SAVEPOINT baton_new_rows');
}

/**
 * The rows of `table` whose `keyColumn` is one of `keys`, one index lookup per key. As
 * `WHERE key = ANY($1)` Postgres read the whole table whenever a batch was a few percent of it (it
 * prices each lookup as a random read): in `baton bench` the executions fold read all of
 * `executions` per batch up to ~40,000 rows. OFFSET 0 keeps the lookup a subquery, so the planner
 * cannot turn it into a join over the whole table.
 */
export async function selectRowsByKeys(client: pg.Pool | pg.ClientBase, table: string, keyColumn: string, keyType: 'uuid' | 'text', keys: readonly string[]): Promise<Record<string, unknown>[]> {
  if (keys.length === 0) return [];
  const column = pg.escapeIdentifier(keyColumn);
  const r = await client.query(`SELECT t.* FROM unnest($1::${keyType}[]) AS k(key) CROSS JOIN LATERAL (SELECT * FROM ${table} WHERE ${column} = k.key OFFSET 0) t`, [keys]);
  return r.rows;
}
