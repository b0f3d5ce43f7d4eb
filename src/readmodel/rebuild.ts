// `baton projections rebuild [name]`, and what the projector does when a projection's version
// changed: build the tables from position 0 in an aside schema while the live ones keep
// serving, then swap them in and move the checkpoint in one short transaction.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/index.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { rebuildSchemaOf, trackScratch } from './scratch.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { START } from '../eventstore/event-store.ts';
import { buildInto, type BuildProgress } from './build.ts';
import { NewerVersionError, readCheckpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { createProjectionTables, dropProjectionTables, inTransaction } from './tables.ts';
import { holdSession } from '../db/held-session.ts';

export interface RebuildResult {
  projection: string;
  events: number;
  position: bigint;
  ms: number;
  /** Why nothing was rebuilt: another rebuild, waited for, did it just now. */
  skipped?: string;
}

/**
 * Run `fn` holding a session advisory lock named `name`: one rebuild of a projection at a time
 * (scratch.ts's sweeper takes the same lock before dropping a leftover aside schema). `fn` is told
 * whether another holder made us wait.
 */
async function withNamedLock<T>(pool: pg.Pool, name: string, onWait: (() => void) | undefined, fn: (waited: boolean) => Promise<T>): Promise<T> {
  const client = await holdSession(pool);
  try {
    const r = await client.query<{ got: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS got', [name]);
    if (!r.rows[0]!.got) {
      onWait?.();
      await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [name]);
    }
    return await fn(!r.rows[0]!.got);
  } finally {
    // Destroy the session rather than unlock: it also frees the lock if the unlock itself fails.
    client.release(true);
  }
}

const changedAt = async (pool: pg.Pool, name: string) =>
  (await pool.query<{ t: Date }>('SELECT updated_at AS t FROM baton_projection_checkpoints WHERE projection = $1', [name])).rows[0]?.t.getTime();

export async function rebuildProjection(o: {
  pool: pg.Pool;
  store: EventStore;
  projection: Projection;
  log?: Logger;
  batchSize?: number;
  onProgress?(p: BuildProgress): void;
  /** Another rebuild of this projection holds its lock: this one waits for it (called once, before waiting). */
  onWait?(): void;
  /** The lock is ours and the rebuild starts now (a progress total counted here is current). */
  onStart?(): Promise<void> | void;
}): Promise<RebuildResult> {
  const p = o.projection;
  // Per installation (BATON_DB_SCHEMA): two of them may rebuild at once in one database.
  const aside = rebuildSchemaOf(o.pool, p.name);
  const live = readModelSchemaOf(o.pool);
  const started = performance.now();
  // Where the events share this database, a projection with a storeView is rebuilt as that view.
  const source = eventSourceOf(o.store, o.pool);
  // Never down a version: a newer Baton's tables are not this code's to replace (see NewerVersionError).
  const stored = await readCheckpoint(o.pool, p.name);
  if (stored.version > p.version) throw new NewerVersionError(p.name, stored.version, p.version);
  const before = await changedAt(o.pool, p.name);
  return withNamedLock(o.pool, aside, o.onWait, async (waited) => {
    if (waited) {
      // The rebuild we waited for swapped in this version from the events (its swap dropped its
      // aside schema and moved the checkpoint): doing it all again would give the same tables.
      const now = await readCheckpoint(o.pool, p.name);
      const asideLeft = (await o.pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [aside])).rowCount! > 0;
      if (now.version > p.version) throw new NewerVersionError(p.name, now.version, p.version);
      if (now.version === p.version && !asideLeft && (await changedAt(o.pool, p.name)) !== before) {
        const skipped = `another rebuild of ${p.name} finished while this one waited (version ${now.version}, to position ${now.position}): not rebuilding again`;
        o.log?.info({ projection: p.name }, skipped);
        return { projection: p.name, events: 0, position: now.position, ms: Math.round(performance.now() - started), skipped };
      }
    }
    await o.onStart?.();
    const untrack = trackScratch(aside);
    try {
      return await rebuildAside();
    } finally {
      untrack();
    }
  });

  async function rebuildAside(): Promise<RebuildResult> {
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
      const locked = await readCheckpoint(client, p.name, { lock: true });
      // A newer projector swapped its version in while we built: leave it (all of this rolls back).
      if (locked.version > p.version) throw new NewerVersionError(p.name, locked.version, p.version);
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
    }).catch(async (err: unknown) => {
      if (err instanceof NewerVersionError) await o.pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(aside)} CASCADE`);
      throw err;
    });
    o.log?.info({ ...result, position: String(result.position) }, 'rebuilt and swapped in');
    return result;
  }
}
