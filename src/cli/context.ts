// What a CLI command needs: the environment every process is made of (environment.ts), with
// a logger on stderr (stdout is for results) and warn as its level.
import { loadConfig, type Config } from '../config.ts';
import { componentLogger, createLogger } from '../log.ts';
import { cliComponent } from './command-name.ts';
import { openEnvironment, type Environment } from './environment.ts';
import type { Logger } from 'pino';
import type pg from 'pg';

export interface CliContext extends Omit<Environment, 'close' | 'db'> {
  databaseUrl: string;
  pool: pg.Pool;
}

/**
 * The Config of a command that runs and ends (not a host): it logs at warn unless
 * BATON_LOG_LEVEL says otherwise, so its output is its result and nothing else (no
 * "joining the embedded Postgres" or "migration applied" lines on every call).
 */
export const cliConfig = (): Config => loadConfig(process.env, process.cwd(), { logLevel: 'warn' });

/**
 * A command's logger: on stderr, so stdout stays the result (a table, JSON). Its lines say which
 * command wrote them (`"component":"cli/status"`), as a host's say which host.
 */
export const cliLogger = (config: Config): Logger => componentLogger(createLogger(config, { destination: 'stderr' }), cliComponent());

/** Run `fn` on the installation the environment names; `readsOnly`: refuse one that does not exist rather than create it. */
export async function withContext<T>(fn: (ctx: CliContext) => Promise<T>, o: { readsOnly?: boolean } = {}): Promise<T> {
  const config = cliConfig();
  const env = await openEnvironment({ config, log: cliLogger(config), as: 'cli', ...(o.readsOnly && { readsOnly: true }) });
  try {
    const { close: _close, db, ...rest } = env;
    return await fn({ ...rest, databaseUrl: db.url, pool: db.pool });
  } finally {
    await env.close();
  }
}

/** withContext for a command that only reads: an installation BATON_DB_SCHEMA names that does not exist is refused, not created. */
export const readContext = <T>(fn: (ctx: CliContext) => Promise<T>): Promise<T> => withContext(fn, { readsOnly: true });
