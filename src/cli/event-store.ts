// Which EventStore adapter a host or CLI command uses: EventStoreDB/KurrentDB when
// BATON_EVENTSTORE_URL is set, Postgres otherwise. Either way projections, the read model,
// liveness and the Postgres work queue stay in Postgres (the pool passed here).
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { redactUrl } from '../db/connect.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { EventStoreKind } from '../eventstore/open.ts';
export type { EventStoreKind };
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createPostgresSnapshotStore } from '../eventstore/snapshots.ts';
import { componentLogger } from '../log.ts';

/**
 * The configured store; `announce` is the level at which to log the choice (hosts: info). The
 * EventStoreDB adapter is imported only when it is the one: its gRPC client costs ~0.16 s of
 * every start otherwise (measured on the 2-core dev machine).
 */
export async function openEventStore(config: Config, pool: pg.Pool, log: Logger, announce: 'info' | 'debug' = 'info'): Promise<{ store: EventStore; kind: EventStoreKind }> {
  if (config.eventStoreUrl) {
    const { createEventStoreDbEventStore } = await import('../eventstore/eventstoredb.ts');
    log[announce]({ eventStore: 'eventstoredb', url: redactUrl(config.eventStoreUrl) }, 'event store: EventStoreDB/KurrentDB (BATON_EVENTSTORE_URL); read model, liveness and work queue in Postgres');
    const snapshots = createPostgresSnapshotStore(pool); // snapshots stay in Postgres (src/eventstore/snapshots.ts)
    return { store: createEventStoreDbEventStore(config.eventStoreUrl, { log: componentLogger(log, 'eventstoredb'), snapshots }), kind: 'eventstoredb' };
  }
  log[announce]({ eventStore: 'postgres' }, 'event store: Postgres');
  return { store: createPostgresEventStore(pool, { log }), kind: 'postgres' };
}
