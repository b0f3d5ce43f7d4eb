// A projection with a storeView (projections/projection.ts) is a view of the events where they
// share the read model's database, and a table elsewhere (tables.ts, formOf). Turning its table
// into the view needs no events read: the view holds every event at once, so the swap is one
// short transaction and the checkpoint stays where it was (the projection keeps following with
// its group). The other way, a table must be filled from the events: the projector rebuilds it
// aside as for a version change (projector-host.ts).
import type pg from 'pg';
import type { Logger } from 'pino';
import type { EventSource, Projection } from '../../projections/projection.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { readCheckpoint } from './checkpoints.ts';
import { createProjectionTables, dropProjectionTables, formOf, inTransaction, liveFormOf } from './tables.ts';

/**
 * Bring the live relations of projections with a storeView into the form this store gives them:
 * a table becomes its view at once; returns the projections whose view must be rebuilt as a table.
 */
export async function alignStoreViews(pool: pg.Pool, list: readonly Projection[], source: EventSource | undefined, log?: Logger): Promise<Set<Projection>> {
  const schema = readModelSchemaOf(pool);
  const toRebuild = new Set<Projection>();
  for (const p of list) {
    if (!p.storeView) continue;
    const live = await liveFormOf(pool, schema, p);
    if (live === formOf(p, source)) continue;
    if (formOf(p, source) === 'table') {
      toRebuild.add(p);
      continue;
    }
    const turned = await inTransaction(pool, async (client) => {
      // Holding the checkpoint row: a projector's batch (or a rebuild's swap) waits, and then finds the view.
      await readCheckpoint(client, p.name, { lock: true });
      if ((await liveFormOf(client, schema, p)) !== 'table') return false; // another process did it meanwhile
      await dropProjectionTables(client, schema, p);
      await createProjectionTables(client, schema, p, source);
      return true;
    });
    if (turned) log?.info({ projection: p.name }, "projection's table replaced by a view of the events (they are in this database)");
  }
  return toRebuild;
}

/**
 * The projections whose live relation is to become their view and is not one yet: a table
 * alignStoreViews turns, or none yet (ensureReadModel creates a table, which is then turned).
 */
export async function relationsToTurnIntoViews(pool: pg.Pool, list: readonly Projection[], source: EventSource | undefined): Promise<Projection[]> {
  const schema = readModelSchemaOf(pool);
  const turning: Projection[] = [];
  for (const p of list) {
    if (p.storeView && formOf(p, source) === 'view' && (await liveFormOf(pool, schema, p)) !== 'view') turning.push(p);
  }
  return turning;
}
