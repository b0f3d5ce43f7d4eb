// What a CLI command needs: config, a logger on stderr (stdout is for results), the database
// (embedded unless BATON_DATABASE_URL is set), the event store and the execution runtime.
import { loadConfig, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { openDatabase } from '../db/connect.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { openConfiguredEventStore } from '../eventstore/open.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { Logger } from 'pino';
import type pg from 'pg';

export interface CliContext {
  config: Config;
  log: Logger;
  databaseUrl: string;
  pool: pg.Pool;
  /** Postgres on `pool`, or EventStoreDB when BATON_EVENTSTORE_URL is set. */
  store: EventStore;
  runtime: ExecutionRuntime;
}

export async function withContext<T>(fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const log = createLogger(config, { destination: 'stderr' });
  const db = await openDatabase(config, log);
  let store: EventStore;
  try {
    store = await openConfiguredEventStore(config, db.pool, log);
  } catch (err) {
    await db.close();
    throw err;
  }
  try {
    return await fn({ config, log, databaseUrl: db.url, pool: db.pool, store, runtime: createExecutionRuntime(store, { defaultMaxAttempts: config.timeouts.maxAttempts }) });
  } finally {
    await store.close();
    await db.close();
  }
}
