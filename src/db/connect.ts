// Opens Baton's database: BATON_DATABASE_URL when set (production), otherwise the embedded
// Postgres under BATON_DATA_DIR (DESIGN.md, Modes). Either way it is migrated before use.
import pg from 'pg';
import type { Logger } from 'pino';
import { dbWaitFor, type Config } from '../config.ts';
import { BatonError } from '../errors.ts';
import { migrateAll, pendingForThisBuild } from './all-migrations.ts';
import { refuseMissingInstallation } from './missing-installation.ts';
import { createSchemaPool } from './db-schema.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.ts';
import { transientReason, waitForServer } from './wait.ts';
import { KEEP_IDLE_CONNECTIONS } from './pool-settings.ts';
import { onLostConnections } from './lost-connections.ts';

import { DatabaseUnavailableError } from './database-unavailable.ts';
import { DatabaseNotMigratedError } from './database-not-migrated.ts';
export { DatabaseNotMigratedError, DatabaseUnavailableError };

export interface Database {
  /** Connection URL (contains the password: do not log it; use redactUrl()). */
  url: string;
  pool: pg.Pool;
  /** true when this is the embedded Postgres (started here or joined). */
  embedded: boolean;
  /** Where the embedded Postgres keeps its data (undefined for BATON_DATABASE_URL). */
  embeddedClusterDir: string | undefined;
  /** Ends the pool, then stops the embedded server if this process started it. Idempotent. */
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Pool size. Default 10 (pg's default). */
  max?: number;
  /** Shows in pg_stat_activity. Default `baton`. */
  applicationName?: string;
  /**
   * Who opens it, which sets how long a database that refuses connections is waited for
   * (BATON_DB_WAIT overrides both): a `host` waits for good, a `cli` command 10 s. Default `cli`.
   */
  waitAs?: 'host' | 'cli';
  /** Stops waiting for the database (a stop signal while starting). */
  signal?: AbortSignal;
  /**
   * `apply`: bring the database up to date; `require`: refuse one that is not
   * (DatabaseNotMigratedError); `none`: neither (`baton migrate --check`). Default BATON_MIGRATE's:
   * on applies, off requires.
   */
  migrations?: 'apply' | 'require' | 'none';
  /**
   * Only read what an installation holds (`baton status`, `list`…): with BATON_DB_SCHEMA naming a
   * schema that does not exist, refuse (NoInstallationError) rather than create an empty
   * installation there, as applying the migrations would (a mistyped name read as "not found").
   */
  readsOnly?: boolean;
}

export async function openDatabase(config: Config, log: Logger, options: OpenDatabaseOptions = {}): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let url: string;
  let source: string;
  if (config.databaseUrl) {
    url = config.databaseUrl;
    source = config.databaseUrlOption ?? 'BATON_DATABASE_URL';
  } else {
    if (config.dataDirFrom === 'above') log.info({ dataDir: config.dataDir }, `using the project's data dir ${config.dataDir}, found above the working directory`);
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, portIsDefault: !config.embeddedPgPortSet, log });
    url = embedded.url;
    source = `the embedded Postgres in ${embedded.clusterDir} (BATON_DATA_DIR, BATON_EMBEDDED_PG_PORT)`;
  }

  // BATON_DB_SCHEMA: this installation's tables in their own schema (db-schema.ts).
  const pool = createSchemaPool(
    {
      connectionString: url,
      max: options.max ?? 10,
      application_name: options.applicationName ?? 'baton',
      connectionTimeoutMillis: 10_000,
      ...KEEP_IDLE_CONNECTIONS,
    },
    config.dbSchema,
  );
  // A lost connection is logged; the query on it fails and reports it (lost-connections.ts).
  // Once close() began, such errors are expected: pool.end() resolves before its connections'
  // goodbyes reach the server, and an embedded server stopped right after cuts them.
  onLostConnections(pool, (err, where) => {
    const what = where === 'idle' ? 'idle Postgres connection lost' : 'Postgres connection lost';
    if (closing) log.debug({ err: lostConnection(err) }, what);
    else log.warn({ err: lostConnection(err) }, what);
  });

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      try {
        await pool.end();
      } finally {
        await embedded?.stop();
      }
    })());

  const wait = dbWaitFor(config, options.waitAs ?? 'cli');
  const migrations = options.migrations ?? (config.migrate ? 'apply' : 'require');
  try {
    // Connecting and migrating are retried together: a server out of connection slots or
    // still starting up can refuse either (pg opens more connections for the migrations).
    const applied = await waitForServer(
      async () => {
        await pool.query('SELECT 1');
        // Only where migrating would create it: with BATON_MIGRATE=off, the refusal below names `baton migrate`.
        if (options.readsOnly && migrations === 'apply' && config.dbSchema !== undefined) await refuseMissingInstallation(pool, config.dbSchema, redactUrl(url));
        if (migrations === 'apply') return migrateAll(pool, { log });
        if (migrations === 'require') {
          const pending = await pendingForThisBuild(pool);
          if (pending.length > 0) throw new DatabaseNotMigratedError(redactUrl(url), pending);
        }
        return [];
      },
      { ...wait, log, what: `Postgres at ${redactUrl(url)}`, signal: options.signal },
    );
    if (applied.length) log.info({ applied }, 'database migrated');
  } catch (err) {
    await close();
    throw err instanceof BatonError ? err : unavailable(err, url, source, options.signal?.aborted ? 'aborted' : wait.waitMs);
  }
  log.debug({ url: redactUrl(url), embedded: !!embedded }, 'database open');
  return { url, pool, embedded: !!embedded, embeddedClusterDir: embedded?.clusterDir, close };
}

/** `source`: BATON_DATABASE_URL, a caller's option, or the embedded Postgres; `waited`: the wait's bound, or `aborted` when the caller's signal stopped it. */
function unavailable(err: unknown, url: string, source: string, waited: number | 'aborted'): DatabaseUnavailableError {
  const e = err as { code?: string; message?: string };
  const transient = transientReason(err);
  // The setting to change: the caller's option when the URL came from one (src/client/options-config.ts).
  const setting = source === 'BATON_DATABASE_URL' || source.startsWith('the embedded') ? 'BATON_DATABASE_URL' : source;
  const hint =
    e.code === '28P01' || e.code === '28000'
      ? 'the user name or password is wrong.'
      : e.code === '3D000'
        ? `create it first, or point ${setting} at an existing database.`
        : e.code === '53300'
          ? 'the server has no connection slot free: raise its max_connections, or run fewer or smaller pools.'
          : transient || e.code === 'ENOTFOUND'
            ? // Only the CLI's variable has the embedded Postgres behind it: a library's option does not.
              `is the server running and reachable?${source === 'BATON_DATABASE_URL' ? ' Unset BATON_DATABASE_URL to use the embedded Postgres instead.' : ''}`
            : '';
  // An SQLSTATE outside the connection classes came from the migrations, not from connecting.
  const connecting = !/^[0-9A-Z]{5}$/.test(e.code ?? '') || /^(08|28|3D|53|57)/.test(e.code!);
  if (!connecting) {
    return new DatabaseUnavailableError(`cannot prepare Postgres at ${redactUrl(url)} (from ${source}) for Baton: ${e.message ?? String(err)}`, { cause: err });
  }
  const gaveUp = !transient
    ? ''
    : waited === 'aborted'
      ? ' (stopped waiting for it: the signal aborted)'
      : waited > 0
        ? ` (gave up after ${Math.round(waited / 100) / 10} s; BATON_DB_WAIT sets how long to wait)`
        : '';
  return new DatabaseUnavailableError(
    `cannot connect to Postgres at ${redactUrl(url)} (from ${source}): ${e.message ?? String(err)}${gaveUp}${hint ? `; ${hint}` : ''}`,
    { cause: err },
  );
}

/** The URL with its password replaced by `***`, for messages and logs. */
/**
 * A lost connection's error as a log line wants it: node-postgres attaches its client to it, whose
 * dump (~5 KB) held the prepared statements and the backend's cancel key.
 */
export const lostConnection = (err: Error): { type: string; message: string; code?: unknown } => ({
  type: err.name,
  message: err.message,
  ...((err as { code?: unknown }).code !== undefined && { code: (err as { code?: unknown }).code }),
});

const SECRET_PARAMETERS = ['password', 'sslpassword'];

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    // node-postgres also takes the password from the query (`?user=…&password=…`), as libpq does.
    for (const key of SECRET_PARAMETERS) if (u.searchParams.has(key)) u.searchParams.set(key, '***');
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
