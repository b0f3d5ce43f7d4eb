// Whether a projection may read the events it applies straight from the events table (see
// EventSource in projections/projection.ts): only with the Postgres event store on the very pool
// the read model is written through.
import type pg from 'pg';
import type { EventSource } from '../../projections/projection.ts';
import type { EventStore } from '../eventstore/event-store.ts';

export function eventSourceOf(store: EventStore, pool: pg.Pool): EventSource | undefined {
  const table = (store as Partial<{ eventsTableFor(pool: pg.Pool): string | undefined }>).eventsTableFor?.(pool);
  return table === undefined ? undefined : { eventsTable: table };
}
