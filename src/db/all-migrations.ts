// Every migration set Baton's database needs, in the order they apply. A new set (the
// projections' read model, say) is appended here and nowhere else.
import type pg from 'pg';
import type { Logger } from 'pino';
import { applyMigrations, type MigrationSet } from './migrate.ts';

export const migrationSets: readonly MigrationSet[] = [
  { name: 'eventstore', dir: new URL('../eventstore/migrations/', import.meta.url) },
  { name: 'liveness', dir: new URL('../liveness/migrations/', import.meta.url) },
  { name: 'transport', dir: new URL('../transport/migrations/', import.meta.url) },
];

/** Bring the database up to date; returns the ids applied (`<set>/<file>`), [] when current. */
export function migrateAll(pool: pg.Pool, options: { log?: Logger } = {}): Promise<string[]> {
  return applyMigrations(pool, [...migrationSets], options);
}
