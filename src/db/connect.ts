// Opens Baton's database: BATON_DATABASE_URL when set (production), otherwise the embedded
// Postgres under BATON_DATA_DIR (DESIGN.md, Modes). Either way it is migrated before use.
import pg from 'pg';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { BatonError } from '../errors.ts';
import { migrateAll } from './all-migrations.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.ts';

/** The database server could not be reached or refused us; the message names the URL (no password) and its source. */
export class DatabaseUnavailableError extends BatonError {}

export interface Database {
  /** Connection URL (contains the password: do not log it; use redactUrl()). */
  url: string;
  pool: pg.Pool;
  /** true when this is the embedded Postgres (started here or joined). */
  embedded: boolean;
  /** Ends the pool, then stops the embedded server if this process started it. Idempotent. */
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Pool size. Default 10 (pg's default). */
  max?: number;
  /** Shows in pg_stat_activity. Default `baton`. */
  applicationName?: string;
}

export async function openDatabase(config: Config, log: Logger, options: OpenDatabaseOptions = {}): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let url: string;
  let source: string;
  if (config.databaseUrl) {
    url = config.databaseUrl;
    source = 'BATON_DATABASE_URL';
  } else {
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, log });
    url = embedded.url;
    source = `the embedded Postgres in ${embedded.clusterDir} (BATON_DATA_DIR, BATON_EMBEDDED_PG_PORT)`;
  }

  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    application_name: options.applicationName ?? 'baton',
    connectionTimeoutMillis: 10_000,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, that would
  // crash the process. The next query fails and reports it instead.
  pool.on('error', (err) => log.warn({ err }, 'idle Postgres connection lost'));
  // A checked-out client has no pool listener (pg-pool removes it), so a connection that dies
  // between two queries of a transaction would emit 'error' with no one listening and crash
  // the process. Its pending or next query fails instead, and the caller retries.
  pool.on('connect', (client) => client.on('error', (err) => log.warn({ err }, 'Postgres connection lost')));

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      try {
        await pool.end();
      } finally {
        await embedded?.stop();
      }
    })());

  try {
    await probe(pool, url, source);
    const applied = await migrateAll(pool, { log });
    if (applied.length) log.info({ applied }, 'database migrated');
  } catch (err) {
    await close();
    throw err;
  }
  log.debug({ url: redactUrl(url), embedded: !!embedded }, 'database open');
  return { url, pool, embedded: !!embedded, close };
}

async function probe(pool: pg.Pool, url: string, source: string): Promise<void> {
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    const e = err as { code?: string; message?: string };
    const hint =
      e.code === '28P01' || e.code === '28000'
        ? 'the user name or password is wrong.'
        : e.code === '3D000'
          ? 'create it first, or point BATON_DATABASE_URL at an existing database.'
          : e.code === 'ECONNREFUSED' || e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' || /timeout/i.test(e.message ?? '')
            ? `is the server running and reachable?${source === 'BATON_DATABASE_URL' ? ' Unset BATON_DATABASE_URL to use the embedded Postgres instead.' : ''}`
            : '';
    throw new DatabaseUnavailableError(
      `cannot connect to Postgres at ${redactUrl(url)} (from ${source}): ${e.message ?? String(err)}${hint ? `; ${hint}` : ''}`,
      { cause: err },
    );
  }
}

/** The URL with its password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable url)';
  }
}

/** The same server and credentials, another database. */
export function urlForDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}
