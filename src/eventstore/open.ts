// Opening an event store by URL: `postgres://` → the Postgres adapter (./postgres.ts) on a pool of
// its own; `esdb://`, `kurrentdb://` (and their `+discover` forms) → the EventStoreDB/KurrentDB
// adapter (./eventstoredb.ts). Used by `baton eventstore copy`, which opens two stores at once.
// Hosts and CLI commands open the configured store through src/cli/event-store.ts.
//
// A Postgres URL names the schema of an installation (BATON_DB_SCHEMA's) by its search_path:
// `?options=-c%20search_path%3Dtenant1`. The pool is then that installation's (src/db/db-schema.ts):
// migrations create the schema if missing and put the read model in `tenant1_read`, not baton_read.
import pg from 'pg';
import type { Logger } from 'pino';
import { migrateAll } from '../db/all-migrations.ts';
import { DatabaseUnavailableError, lostConnection, redactUrl } from '../db/connect.ts';
import { BatonError, ConfigError } from '../errors.ts';
import type { EventStore } from './event-store.ts';
import { createEventStoreDbEventStore } from './eventstoredb.ts';
import { countEvents, createPostgresEventStore } from './postgres.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';
import { SCHEMA_NAME, registerPoolSchema } from '../db/db-schema.ts';

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

// `-c search_path=<schema>` (spaces around `=` allowed), the form libpq and pg read from `options`.
const SEARCH_PATH_OPTION = /^\s*-c\s*search_path\s*=\s*(\S*)\s*$/;

/**
 * The schema a Postgres URL's `options=-c search_path=<schema>` names; undefined when it sets no
 * search_path. Any other search_path (several schemas, other options beside it) is refused: which
 * installation it means could not be told, and its tables would be read or made wherever it led.
 */
export function postgresUrlSchema(url: string, what = 'event store URL'): string | undefined {
  let options: string | null;
  try {
    options = new URL(url).searchParams.get('options');
  } catch {
    return undefined; // not a URL: eventStoreKindOf says so
  }
  if (options === null || !/search_path/i.test(options)) return undefined;
  const schema = SEARCH_PATH_OPTION.exec(options)?.[1];
  if (schema === undefined || !SCHEMA_NAME.test(schema)) {
    throw new ConfigError(
      `${what}: options=${JSON.stringify(options)}: a search_path must be given alone as -c search_path=<schema>, one schema of 1 to 30 lower-case letters, digits or _ (as BATON_DB_SCHEMA), e.g. ?options=-c%20search_path%3Dtenant1`,
    );
  }
  return schema;
}

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
    const store = createEventStoreDbEventStore(url, o.log ? { log: o.log } : {});
    return { kind, label, store, close: () => store.close() };
  }
  const schema = postgresUrlSchema(url);
  const pool = new pg.Pool({ connectionString: url, max: o.poolSize ?? 4, application_name: o.applicationName ?? 'baton', connectionTimeoutMillis: 10_000, ...KEEP_IDLE_CONNECTIONS });
  if (schema !== undefined) registerPoolSchema(pool, schema);
  pool.on('error', (err) => o.log?.warn({ err: lostConnection(err) }, 'idle Postgres connection lost'));
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
