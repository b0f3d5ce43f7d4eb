// What a CLI command needs: config, a logger on stderr (stdout is for results), the database
// (embedded unless BATON_DATABASE_URL is set), the event store (EventStoreDB when
// BATON_EVENTSTORE_URL is set, else Postgres) and the execution runtime.
import { loadConfig, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { openDatabase } from '../db/connect.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { openEventStore } from './event-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { Logger } from 'pino';
import type pg from 'pg';

export interface CliContext {
  config: Config;
  log: Logger;
  databaseUrl: string;
  pool: pg.Pool;
  store: EventStore;
  runtime: ExecutionRuntime;
}

/**
 * The Config of a command that runs and ends (not a host): it logs at warn unless
 * BATON_LOG_LEVEL says otherwise, so its output is its result and nothing else (no
 * "joining the embedded Postgres" or "migration applied" lines on every call).
 */
export const cliConfig = (): Config => loadConfig(process.env, process.cwd(), { logLevel: 'warn' });

/** A command's logger: on stderr, so stdout stays the result (a table, JSON). */
export const cliLogger = (config: Config): Logger => createLogger(config, { destination: 'stderr' });

export async function withContext<T>(fn: (ctx: CliContext) => Promise<T>): Promise<T> {
  const config = cliConfig();
  const log = cliLogger(config);
  const db = await openDatabase(config, log);
  const { store } = await openEventStore(config, db.pool, log, 'debug');
  try {
    return await fn({ config, log, databaseUrl: db.url, pool: db.pool, store, runtime: createExecutionRuntime(store, { defaultMaxAttempts: config.timeouts.maxAttempts }) });
  } finally {
    await store.close();
    await db.close();
  }
}
