// Every migration set Baton's database needs, in the order they apply. A new set (the
// projections' read model, say) is appended here and nowhere else.
import type pg from 'pg';
import type { Logger } from 'pino';
import { ensureReadModel, projectionsWithoutTables, readModelReady } from '../readmodel/tables.ts';
import { applyMigrations, migrationsApplied, pendingMigrations, type MigrationSet } from './migrate.ts';
import { ensureDbSchema } from './db-schema.ts';

export const migrationSets: readonly MigrationSet[] = [
  { name: 'eventstore', dir: new URL('../eventstore/migrations/', import.meta.url) },
  { name: 'liveness', dir: new URL('../liveness/migrations/', import.meta.url) },
  { name: 'transport', dir: new URL('../transport/migrations/', import.meta.url) },
  { name: 'projections', dir: new URL('../../projections/migrations/', import.meta.url) },
];

/** Bring the database up to date; returns the ids applied (`<set>/<file>`), [] when current. */
export async function migrateAll(pool: pg.Pool, options: { log?: Logger } = {}): Promise<string[]> {
  // The common case, a current database, in two queries and no lock: the locked pass below
  // takes ~12 round trips (lock, a read per set, the read model's transaction), which every CLI
  // command paid on every call.
  if ((await migrationsApplied(pool, [...migrationSets])) && (await readModelReady(pool))) return [];
  await ensureDbSchema(pool); // BATON_DB_SCHEMA: the tables below are created in it
  const applied = await applyMigrations(pool, [...migrationSets], options);
  // The read model's live tables: created from each projection's DDL, not from migration
  // files, because a changed projection is rebuilt rather than altered (src/readmodel/).
  const created = await ensureReadModel(pool);
  if (created.length > 0) options.log?.info({ projections: created }, 'read model tables created');
  return [...applied, ...created.map((name) => `read-model/${name}`)];
}

/**
 * What migrateAll would do, without doing it: the migration files not yet applied, then the
 * read model's tables not yet created (`read-model/<projection>`). [] when the database is current.
 */
export async function pendingForThisBuild(pool: pg.Pool): Promise<string[]> {
  const files = await pendingMigrations(pool, [...migrationSets]);
  const tables = await projectionsWithoutTables(pool);
  return [...files, ...tables.map((name) => `read-model/${name}`)];
}
