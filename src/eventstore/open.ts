// Opening an event store by URL: `postgres://` → the Postgres adapter (./postgres.ts) on a pool of
// its own; `esdb://`, `kurrentdb://` (and their `+discover` forms) → the EventStoreDB/KurrentDB
// adapter (./eventstoredb.ts). Used by `baton eventstore copy`, which opens two stores at once,
// and by the hosts when BATON_EVENTSTORE_URL is set.
//
// The EventStoreDB adapter is imported lazily, by a computed specifier: a Postgres-only process
// never loads @eventstore/db-client (and its gRPC stack), and this file does not depend on the
// adapter at compile time.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { migrateAll } from '../db/all-migrations.ts';
import { DatabaseUnavailableError, redactUrl } from '../db/connect.ts';
import { BatonError, ConfigError } from '../errors.ts';
import type { EventStore } from './event-store.ts';
import { countEvents, createPostgresEventStore } from './postgres.ts';

export type EventStoreKind = 'postgres' | 'eventstoredb';

const POSTGRES_SCHEMES = ['postgres', 'postgresql'];
// The same list config.ts accepts for BATON_EVENTSTORE_URL.
const EVENTSTOREDB_SCHEMES = ['esdb', 'esdb+discover', 'kurrentdb', 'kurrentdb+discover', 'kurrent', 'kurrent+discover'];

/** Which adapter a URL selects; ConfigError naming `what` (e.g. `--from`) for anything else. */
export function eventStoreKindOf(url: string, what = 'event store URL'): EventStoreKind {
  let scheme: string;
  try {
    scheme = new URL(url).protocol.replace(/:$/, '');
  } catch {
    throw new ConfigError(`${what}: not a URL; expected postgres://user:password@host:5432/database or esdb://host:2113?tls=false`);
  }
  if (POSTGRES_SCHEMES.includes(scheme)) return 'postgres';
  if (EVENTSTOREDB_SCHEMES.includes(scheme)) return 'eventstoredb';
  throw new ConfigError(`${what}: unsupported scheme "${scheme}:"; expected one of ${[...POSTGRES_SCHEMES, ...EVENTSTOREDB_SCHEMES].map((s) => `${s}://`).join(', ')}`);
}

/** Thrown when an esdb:// URL is used in a build that does not have src/eventstore/eventstoredb.ts. */
export class EventStoreAdapterMissingError extends BatonError {}

export interface OpenedEventStore {
  kind: EventStoreKind;
  /** The URL with its password replaced by `***`: safe to print and log. */
  label: string;
  store: EventStore;
  /** How many events the store holds, when the adapter can tell cheaply (a progress bar's total). */
  countEvents?: () => Promise<number>;
  /** Closes the store and whatever this function opened for it (the Postgres pool). */
  close(): Promise<void>;
}

export interface OpenEventStoreOptions {
  log?: Logger;
  /**
   * Postgres only: bring the database's schema up to date first (every Baton migration, as a
   * host does on start). Without it the database must already hold a Baton event store; a copy
   * opens its source this way so that reading never changes it.
   */
  migrate?: boolean;
  /** Postgres only: shows in pg_stat_activity. Default `baton`. */
  applicationName?: string;
  /** Postgres only: pool size. Default 4. */
  poolSize?: number;
}

export async function openEventStoreByUrl(url: string, o: OpenEventStoreOptions = {}): Promise<OpenedEventStore> {
  const kind = eventStoreKindOf(url);
  const label = redactUrl(url);
  if (kind === 'eventstoredb') {
    const store = await createEventStoreDb(url, o.log);
    return { kind, label, store, close: () => store.close() };
  }
  const pool = new pg.Pool({ connectionString: url, max: o.poolSize ?? 4, application_name: o.applicationName ?? 'baton', connectionTimeoutMillis: 10_000 });
  pool.on('error', (err) => o.log?.warn({ err }, 'idle Postgres connection lost'));
  try {
    await pool.query('SELECT 1').catch((err: unknown) => {
      throw new DatabaseUnavailableError(`cannot connect to Postgres at ${label}: ${(err as Error).message}`, { cause: err });
    });
    if (o.migrate) {
      await migrateAll(pool, { log: o.log });
    } else {
      const r = await pool.query<{ present: boolean }>("SELECT to_regclass('baton_events') IS NOT NULL AS present");
      if (!r.rows[0]?.present) throw new BatonError(`${label} holds no Baton event store (no baton_events table)`);
    }
  } catch (err) {
    await pool.end();
    throw err;
  }
  const store = createPostgresEventStore(pool, { log: o.log });
  return {
    kind,
    label,
    store,
    countEvents: () => countEvents(pool, ['']),
    async close() {
      await store.close();
      await pool.end();
    },
  };
}

/** The shape this file needs from ./eventstoredb.ts (written separately; see the header). */
interface EventStoreDbAdapterModule {
  createEventStoreDbEventStore(connectionString: string, options?: { log?: Logger }): EventStore | Promise<EventStore>;
}

const EVENTSTOREDB_ADAPTER = new URL('./eventstoredb.ts', import.meta.url).href;

async function createEventStoreDb(url: string, log: Logger | undefined): Promise<EventStore> {
  let adapter: EventStoreDbAdapterModule;
  try {
    adapter = (await import(EVENTSTOREDB_ADAPTER)) as EventStoreDbAdapterModule;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'ERR_MODULE_NOT_FOUND' && e.message?.includes('eventstoredb')) {
      throw new EventStoreAdapterMissingError(
        `${redactUrl(url)}: this build has no EventStoreDB adapter (src/eventstore/eventstoredb.ts is missing); use a postgres:// URL`,
        { cause: err },
      );
    }
    throw err;
  }
  if (typeof adapter.createEventStoreDbEventStore !== 'function') {
    throw new EventStoreAdapterMissingError('src/eventstore/eventstoredb.ts does not export createEventStoreDbEventStore(connectionString, options)');
  }
  return adapter.createEventStoreDbEventStore(url, log ? { log } : undefined);
}

/**
 * The event store a host or CLI command uses: EventStoreDB when BATON_EVENTSTORE_URL is set,
 * else Postgres on the database's pool (which the caller owns; closing the store leaves it open).
 * The read model, liveness and the Postgres work queue stay in Postgres either way.
 */
export async function openConfiguredEventStore(config: Pick<Config, 'eventStoreUrl'>, pool: pg.Pool, log?: Logger): Promise<EventStore> {
  if (!config.eventStoreUrl) return createPostgresEventStore(pool, { log });
  return (await openEventStoreByUrl(config.eventStoreUrl, { log })).store;
}
