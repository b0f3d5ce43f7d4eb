// `baton projections rebuild [name]`, and what the projector does when a projection's version
// changed: build the tables from position 0 in an aside schema while the live ones keep
// serving, then swap them in and move the checkpoint in one short transaction.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/index.ts';
import { dbSchemaOf, readModelSchemaOf } from '../db/db-schema.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { START } from '../eventstore/event-store.ts';
import { buildInto, type BuildProgress } from './build.ts';
import { readCheckpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { createProjectionTables, dropProjectionTables, inTransaction } from './tables.ts';

export interface RebuildResult {
  projection: string;
  events: number;
  position: bigint;
  ms: number;
}

/** Run `fn` holding a session advisory lock named `name`: one rebuild of a projection at a time. */
async function withNamedLock<T>(pool: pg.Pool, name: string, fn: () => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [name]);
    return await fn();
  } finally {
    // Destroy the session rather than unlock: it also frees the lock if the unlock itself fails.
    client.release(true);
  }
}

export async function rebuildProjection(o: {
  pool: pg.Pool;
  store: EventStore;
  projection: Projection;
  log?: Logger;
  batchSize?: number;
  onProgress?(p: BuildProgress): void;
}): Promise<RebuildResult> {
  const p = o.projection;
  // Per installation (BATON_DB_SCHEMA): two of them may rebuild at once in one database.
  const schemaOfPool = dbSchemaOf(o.pool);
  const aside = schemaOfPool === undefined ? `baton_rebuild_${p.name}` : `${schemaOfPool}_rebuild_${p.name}`;
  const live = readModelSchemaOf(o.pool);
  const started = performance.now();
  // Where the events share this database, a projection with a storeView is rebuilt as that view.
  const source = eventSourceOf(o.store, o.pool);
  return withNamedLock(o.pool, aside, async () => {
    // A rebuild that died half-way left its aside schema: start it afresh.
    await inTransaction(o.pool, async (client) => {
      await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(aside)} CASCADE`);
      await client.query(`CREATE SCHEMA ${pg.escapeIdentifier(aside)}`);
      await createProjectionTables(client, aside, p, source);
    });
    o.log?.info({ projection: p.name, schema: aside }, 'rebuilding aside');
    const built = await buildInto({ ...o, schema: aside, from: START });
    const result = await inTransaction(o.pool, async (client) => {
      // Holding the checkpoint row stops the live projector between batches while we swap.
      await readCheckpoint(client, p.name, { lock: true });
      const tail = await buildInto({ ...o, schema: aside, from: built.position, client });
      await dropProjectionTables(client, live, p); // a view, when the form changed with the store
      for (const t of p.tables) {
        await client.query(`ALTER TABLE ${pg.escapeIdentifier(aside)}.${pg.escapeIdentifier(t.name)} SET SCHEMA ${pg.escapeIdentifier(live)}`);
      }
      const events = built.events + tail.events;
      const position = tail.events > 0 ? tail.position : built.position;
      await client.query(
        `UPDATE baton_projection_checkpoints
            SET position = $2, version = $3, events_applied = $4, last_recorded_at = $5, updated_at = now()
          WHERE projection = $1`,
        [p.name, position.toString(), p.version, events, tail.lastRecordedAt ?? built.lastRecordedAt],
      );
      await client.query(`DROP SCHEMA ${pg.escapeIdentifier(aside)}`);
      return { projection: p.name, events, position, ms: Math.round(performance.now() - started) };
    });
    o.log?.info({ ...result, position: String(result.position) }, 'rebuilt and swapped in');
    return result;
  });
}
