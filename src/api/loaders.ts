// Per-request DataLoaders: every nested field of one kind that a query asks for (each
// execution's events, each holder's heartbeat, each large value asked for whole) is read in one
// query, not one per parent. Per request so nothing is cached between requests.
import type { RateLimitPolicy } from '../../schemas/rate-limit-events.ts';
import { advertisedRateLimits } from '../liveness/rate-limit-wait.ts';
import DataLoader from 'dataloader';
import type pg from 'pg';
import { DEFAULT_API_LIMITS } from '../config.ts';
import { createLivenessStore, type ActionOffer } from '../liveness/liveness-store.ts';
import { badInput } from './errors.ts';
import {
  findExecutions,
  findHeartbeats,
  findWholeValues,
  listEvents,
  type CappedExecutionRow,
  type EventRow,
  type EventValueColumn,
  type ExecutionValueColumn,
} from './read-model-queries.ts';

/**
 * Events one request may return in all. `first` and `limit` each have caps, but 100 executions
 * × 1,000 events each (× aliases) would still be a very large answer; past this the request
 * is refused rather than served.
 */
export const EVENTS_PER_REQUEST = 10_000;

export interface Loaders {
  /** Rows with their large JSON values read only up to the value cap (see CappedExecutionRow). */
  execution: DataLoader<string, CappedExecutionRow | null>;
  /** worker id → last heartbeat (ISO), null without a liveness row. */
  heartbeat: DataLoader<string, string | null>;
  /** One loader per (fromRevision, limit) a request uses: ids → that window of each stream. */
  events(fromRevision: number, limit: number): DataLoader<string, EventRow[]>;
  /** Charge `count` events read elsewhere (an archive file, the event store) to the same EVENTS_PER_REQUEST. */
  takeEvents(count: number): void;
  /** An execution's large JSON value whole: execution id → value (undefined: no such row). */
  executionValue(column: ExecutionValueColumn): DataLoader<string, unknown>;
  /** An event's large JSON value whole: `executionId:revision` → value. */
  eventValue(column: EventValueColumn): DataLoader<string, unknown>;
  /** action → the live workers offering it now (null: none), by a heartbeat within `staleAfterMs`. */
  offering(staleAfterMs: number): DataLoader<string, ActionOffer | null>;
  /** action → the rate limit its workers advertise (null: none). */
  rateLimit: DataLoader<string, RateLimitPolicy | null>;
}

export function createLoaders(pool: pg.Pool, eventBudget = EVENTS_PER_REQUEST, valueCap = DEFAULT_API_LIMITS.maxValueBytes): Loaders {
  const eventLoaders = new Map<string, DataLoader<string, EventRow[]>>();
  let offeringLoader: DataLoader<string, ActionOffer | null> | undefined;
  const valueLoaders = new Map<string, DataLoader<string, unknown>>();
  const wholeValues = (of: Parameters<typeof findWholeValues>[1]) => {
    const key = `${of.table}.${of.column}`;
    let loader = valueLoaders.get(key);
    if (!loader) {
      loader = new DataLoader(async (keys) => {
        const values = await findWholeValues(pool, of, keys);
        return keys.map((k) => values.get(k));
      });
      valueLoaders.set(key, loader);
    }
    return loader;
  };
  let eventsLeft = eventBudget;
  const takeEvents = (count: number) => {
    if (count > eventsLeft) {
      throw badInput('limit', `this request would return more than ${eventBudget} events in all; ask for fewer executions (first) or fewer events each (limit)`);
    }
    eventsLeft -= count;
  };
  return {
    execution: new DataLoader(async (ids) => {
      const rows = new Map((await findExecutions(pool, ids, valueCap)).map((r) => [r.executionId, r]));
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
          const byExecution = await listEvents(pool, ids, { fromRevision, limit, total: eventsLeft + 1, valueCap });
          takeEvents([...byExecution.values()].reduce((n, rows) => n + rows.length, 0));
          return ids.map((id) => byExecution.get(id) ?? []);
        });
        eventLoaders.set(key, loader);
      }
      return loader;
    },
    takeEvents,
    executionValue: (column) => wholeValues({ table: 'executions', column }),
    eventValue: (column) => wholeValues({ table: 'events', column }),
    rateLimit: new DataLoader(async (actions) => {
      const limits = await advertisedRateLimits(pool, actions);
      return actions.map((a) => limits.get(a) ?? null);
    }),
    offering(staleAfterMs) {
      offeringLoader ??= new DataLoader(async (actions) => {
        const offers = await createLivenessStore(pool).offering(actions, staleAfterMs);
        return actions.map((a) => offers.get(a) ?? null);
      });
      return offeringLoader;
    },
  };
}
