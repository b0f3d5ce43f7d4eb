// Forward-only SQL migrations in named sets (eventstore, projections, …), graphile-worker
// style: numbered *.sql files, append-only, each applied once and recorded with a checksum.
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';

export interface MigrationSet {
  /** Recorded as baton_schema_migrations.set_name; never rename a set once shipped. */
  name: string;
  /** Directory holding `<number>_<name>.sql` files (a URL ending in `/`). */
  dir: URL;
}

/** A migration file could not be applied, or an applied one was edited; the message names the file. */
export class MigrationError extends BatonError {}

const MIGRATIONS_TABLE = 'baton_schema_migrations';
// One lock for every migration run against a database, whatever the sets: concurrent
// processes starting at once queue here instead of racing on CREATE TABLE / the same files.
const LOCK_SQL = `SELECT pg_advisory_lock(hashtextextended('${MIGRATIONS_TABLE}', 0))`;
const UNLOCK_SQL = `SELECT pg_advisory_unlock(hashtextextended('${MIGRATIONS_TABLE}', 0))`;

interface MigrationFile {
  id: string;
  file: string;
  sql: string;
  checksum: string;
}

/**
 * Apply every not-yet-applied file of each set, in set order then file-name order, each
 * file in its own transaction together with its record. Returns the ids applied
 * (`<set>/<file without .sql>`); an up-to-date database returns []. Throws MigrationError
 * when an applied file's contents changed since it was applied.
 */
export async function applyMigrations(
  pool: pg.Pool,
  sets: MigrationSet[],
  options: { log?: Logger } = {},
): Promise<string[]> {
  // Read and validate every file before touching the database.
  const loaded = await Promise.all(sets.map(async (set) => ({ set, files: await readSet(set) })));
  const applied: string[] = [];
  const client = await pool.connect();
  try {
    // Session-level lock: released by the unlock below, or by the server if we die holding it.
    await client.query(LOCK_SQL);
    await client.query(`CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
      set_name   text NOT NULL,
      id         text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      checksum   text NOT NULL,
      PRIMARY KEY (set_name, id)
    )`);
    for (const { set, files } of loaded) {
      const { rows } = await client.query<{ id: string; checksum: string }>(
        `SELECT id, checksum FROM ${MIGRATIONS_TABLE} WHERE set_name = $1`,
        [set.name],
      );
      const done = new Map(rows.map((r) => [r.id, r.checksum]));
      for (const m of files) {
        const recorded = done.get(m.id);
        if (recorded !== undefined) {
          if (recorded !== m.checksum) {
            throw new MigrationError(
              `migration ${m.file} (set "${set.name}") was changed after it was applied ` +
                `(checksum ${recorded.slice(0, 12)}… recorded, ${m.checksum.slice(0, 12)}… now). ` +
                'Applied migrations are append-only: restore the file and put the change in a new migration.',
            );
          }
          continue;
        }
        await applyOne(client, set, m);
        applied.push(`${set.name}/${m.id}`);
        options.log?.info({ set: set.name, migration: m.id }, 'migration applied');
      }
    }
    await client.query(UNLOCK_SQL);
  } finally {
    // Destroyed, never returned to the pool: a migration may have SET session state, and
    // closing the session also drops the advisory lock if we got here by an error.
    client.release(true);
  }
  return applied;
}

/**
 * Whether every file of every set is already applied, unchanged: one query and no lock, so a
 * process that starts against a current database (every CLI command) skips the locked pass of
 * applyMigrations, which costs a round trip per set. False when anything is missing or differs
 * (applyMigrations then applies it, or names the changed file), or the table does not exist yet.
 */
export async function migrationsApplied(pool: pg.Pool, sets: MigrationSet[]): Promise<boolean> {
  return (await pendingMigrations(pool, sets)).length === 0;
}

/**
 * The files of `sets` not yet applied (`<set>/<file without .sql>`), in the order they would
 * apply; one whose applied contents differ is listed as `… (changed since it was applied)`.
 * One query, no lock: what `baton migrate --check` and BATON_MIGRATE=off report.
 */
export async function pendingMigrations(pool: pg.Pool, sets: MigrationSet[]): Promise<string[]> {
  const files = await Promise.all(sets.map(async (set) => ({ set, files: await readSet(set) })));
  let rows: { set_name: string; id: string; checksum: string }[];
  try {
    rows = (await pool.query<{ set_name: string; id: string; checksum: string }>(`SELECT set_name, id, checksum FROM ${MIGRATIONS_TABLE}`)).rows;
  } catch (err) {
    if ((err as { code?: string }).code !== '42P01') throw err;
    rows = []; // undefined_table: a fresh database, every file pending
  }
  const recorded = new Map(rows.map((r) => [`${r.set_name}/${r.id}`, r.checksum]));
  return files.flatMap(({ set, files }) =>
    files.flatMap((m) => {
      const id = `${set.name}/${m.id}`;
      const checksum = recorded.get(id);
      return checksum === m.checksum ? [] : [checksum === undefined ? id : `${id} (changed since it was applied)`];
    }),
  );
}

async function applyOne(client: pg.PoolClient, set: MigrationSet, m: MigrationFile): Promise<void> {
  await client.query('BEGIN');
  try {
    // Simple-query protocol (no parameters): a file may hold many statements and $$ bodies.
    await client.query(m.sql);
    await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (set_name, id, checksum) VALUES ($1, $2, $3)`, [
      set.name,
      m.id,
      m.checksum,
    ]);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new MigrationError(`migration ${m.file} (set "${set.name}") failed${where(err, m.sql)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** " at line N" from a Postgres error's 1-based character position, when it has one. */
function where(err: unknown, sql: string): string {
  const position = Number((err as { position?: string }).position);
  if (!Number.isInteger(position) || position <= 0) return '';
  return ` at line ${sql.slice(0, position - 1).split('\n').length}`;
}

const FILE_NAME = /^(\d+)_[A-Za-z0-9_.-]+\.sql$/;

async function readSet(set: MigrationSet): Promise<MigrationFile[]> {
  const dir = fileURLToPath(set.dir);
  let names: string[];
  try {
    names = (await fs.readdir(dir)).filter((n) => n.endsWith('.sql'));
  } catch (err) {
    throw new MigrationError(`migration set "${set.name}": cannot read ${dir}: ${(err as Error).message}`, { cause: err });
  }
  // Code-unit order, not locale order, so every machine applies the same sequence.
  names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const seen = new Map<number, string>();
  return Promise.all(
    names.map(async (file) => {
      const match = FILE_NAME.exec(file);
      if (!match) {
        throw new MigrationError(`migration set "${set.name}": ${file} must be named <number>_<name>.sql (e.g. 0002_add_index.sql)`);
      }
      const n = Number(match[1]);
      const other = seen.get(n);
      if (other) {
        // Two engineers picked the same number: the order between them would be an accident.
        throw new MigrationError(`migration set "${set.name}": ${other} and ${file} share the number ${match[1]}; renumber one`);
      }
      seen.set(n, file);
      const sql = await fs.readFile(new URL(file, set.dir), 'utf8');
      // Hash with normalized line endings so a Windows checkout (CRLF) is not "changed".
      const checksum = createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
      return { id: file.slice(0, -'.sql'.length), file: `${dir.replace(/\/?$/, '/')}${file}`, sql, checksum };
    }),
  );
}
