// Per-request DataLoaders: every nested field of one kind that a query asks for (each
// execution's events, each holder's heartbeat) is read in one query, not one per parent.
// Per request so nothing is cached between requests.
import DataLoader from 'dataloader';
import type pg from 'pg';
import type { ExecutionRow } from '../../projections/executions.ts';
import { createLivenessStore, type ActionOffer } from '../liveness/liveness-store.ts';
import { badInput } from './errors.ts';
import { findExecutions, findHeartbeats, listEvents, type EventRow } from './read-model-queries.ts';

/**
 * Events one request may return in all. `first` and `limit` each have caps, but 100 executions
 * × 1,000 events each (× aliases) would still be a very large answer; past this the request
 * is refused rather than served.
 */
export const EVENTS_PER_REQUEST = 10_000;

export interface Loaders {
  execution: DataLoader<string, ExecutionRow | null>;
  /** worker id → last heartbeat (ISO), null without a liveness row. */
  heartbeat: DataLoader<string, string | null>;
  /** One loader per (fromRevision, limit) a request uses: ids → that window of each stream. */
  events(fromRevision: number, limit: number): DataLoader<string, EventRow[]>;
  /** action → the live workers offering it now (null: none), by a heartbeat within `staleAfterMs`. */
  offering(staleAfterMs: number): DataLoader<string, ActionOffer | null>;
}

export function createLoaders(pool: pg.Pool, eventBudget = EVENTS_PER_REQUEST): Loaders {
  const eventLoaders = new Map<string, DataLoader<string, EventRow[]>>();
  let offeringLoader: DataLoader<string, ActionOffer | null> | undefined;
  let eventsLeft = eventBudget;
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
          // One more than is left: getting it means the request asked for too much.
          const byExecution = await listEvents(pool, ids, fromRevision, limit, eventsLeft + 1);
          const got = [...byExecution.values()].reduce((n, rows) => n + rows.length, 0);
          if (got > eventsLeft) {
            throw badInput('limit', `this request would return more than ${eventBudget} events in all; ask for fewer executions (first) or fewer events each (limit)`);
          }
          eventsLeft -= got;
          return ids.map((id) => byExecution.get(id) ?? []);
        });
        eventLoaders.set(key, loader);
      }
      return loader;
    },
    offering(staleAfterMs) {
      offeringLoader ??= new DataLoader(async (actions) => {
        const offers = await createLivenessStore(pool).offering(actions, staleAfterMs);
        return actions.map((a) => offers.get(a) ?? null);
      });
      return offeringLoader;
    },
  };
}
