// Per-request DataLoaders: every nested field of one kind that a query asks for (each
// execution's events, each holder's heartbeat) is read in one query, not one per parent.
// Per request so nothing is cached between requests.
import DataLoader from 'dataloader';
import type pg from 'pg';
import type { ExecutionRow } from '../../projections/executions.ts';
import { findExecutions, findHeartbeats, listEvents, type EventRow } from './read-model-queries.ts';

export interface Loaders {
  execution: DataLoader<string, ExecutionRow | null>;
  /** worker id → last heartbeat (ISO), null without a liveness row. */
  heartbeat: DataLoader<string, string | null>;
  /** One loader per (fromRevision, limit) a request uses: ids → that window of each stream. */
  events(fromRevision: number, limit: number): DataLoader<string, EventRow[]>;
}

export function createLoaders(pool: pg.Pool): Loaders {
  const eventLoaders = new Map<string, DataLoader<string, EventRow[]>>();
  return {
    execution: new DataLoader(async (ids) => {
      const rows = new Map((await findExecutions(pool, ids)).map((r) => [r.executionId, r]));
      return ids.map((id) => rows.get(id) ?? null);
    }),
    heartbeat: new DataLoader(async (workerIds) => {
      const beats = await findHeartbeats(pool, workerIds);
      return workerIds.map((id) => beats.get(id) ?? null);
    }),
    events(fromRevision, limit) {
      const key = `${fromRevision}:${limit}`;
      let loader = eventLoaders.get(key);
      if (!loader) {
        loader = new DataLoader(async (ids) => {
          const byExecution = await listEvents(pool, ids, fromRevision, limit);
          return ids.map((id) => byExecution.get(id) ?? []);
        });
        eventLoaders.set(key, loader);
      }
      return loader;
    },
  };
}
