// A command that only reads, pointed at an installation that does not exist (BATON_DB_SCHEMA
// naming a schema nobody created, most often a typo): said at once, naming the installations the
// database does hold, instead of migrating an empty one into being and answering "not found".
import type pg from 'pg';
import { BatonError } from '../errors.ts';

export class NoInstallationError extends BatonError {}

/** Throws NoInstallationError when `schema` does not exist in the database `where` names. */
export async function refuseMissingInstallation(pool: pg.Pool, schema: string, where: string): Promise<void> {
  const exists = await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  if (exists.rowCount) return;
  // Installations: schemas holding an event store (the default one lives in public).
  const found = await pool.query<{ nspname: string }>(
    `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'baton_events' AND c.relkind IN ('r', 'v', 'p') ORDER BY 1`,
  );
  const names = found.rows.map((r) => (r.nspname === 'public' ? 'the default (BATON_DB_SCHEMA unset)' : `"${r.nspname}"`));
  throw new NoInstallationError(
    `BATON_DB_SCHEMA: no Baton installation in schema "${schema}" of ${where}: nothing to read there (this command creates none); ` +
      (names.length > 0 ? `installations there: ${names.join(', ')}` : 'the database holds no installation yet'),
  );
}
