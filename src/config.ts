// The only module that reads process.env. Every variable is parsed once, here, into a
// complete typed Config (defaults applied, paths resolved), in the spirit of Temporal's
// WorkerOptions -> CompiledWorkerOptions; the rest of the code takes a Config.
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.ts';
import { unknownNameMessage } from './input/nearest.ts';
import type { RateLimitPolicy } from '../schemas/worker-events.ts';
import { defaultDataDir, type DataDirSource } from './config-data-dir.ts';
import { byteSize, count, dbSchemaSetting, duration, hostAllowList, namespaceLimitsSetting, namespaceRateLimitsSetting, namespaceSetting, onOff, port, retentionSetting, token, unsetIfEmpty, urlWith, waitDuration } from './config-values.ts';

export { formatDuration, parseByteSize, parseDuration } from './config-values.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  /** BATON_DATABASE_URL. Unset: Baton runs its embedded Postgres (src/db/embedded.ts). */
  readonly databaseUrl: string | undefined;
  /** Set when a library caller gave databaseUrl as an option (src/client/options-config.ts): errors name that option, not BATON_DATABASE_URL. */
  readonly databaseUrlOption?: string;
  /**
   * BATON_DATA_DIR, absolute. Holds the embedded Postgres cluster (`<dataDir>/postgres`). Unset:
   * the nearest `.baton` from the working directory upward, else `./.baton` (src/config-data-dir.ts).
   */
  readonly dataDir: string;
  /** Where dataDir came from: BATON_DATA_DIR, the working directory's `.baton`, or a project's found above it. */
  readonly dataDirFrom: DataDirSource;
  /** BATON_EMBEDDED_PG_PORT: where the embedded Postgres listens (127.0.0.1 only). */
  readonly embeddedPgPort: number;
  /** Whether BATON_EMBEDDED_PG_PORT was set: then a taken port is refused, where a taken default is replaced by a free one. */
  readonly embeddedPgPortSet: boolean;
  /**
   * BATON_DB_WAIT: how long a process starting up waits for its database to accept it (ms;
   * Infinity: for good; 0: one try). undefined when unset: hosts wait for good, CLI commands
   * DEFAULT_CLI_DB_WAIT_MS (see dbWaitFor()).
   */
  readonly dbWaitMs: number | undefined;
  /** BATON_NATS_URL. Unset: work goes through the Postgres queue. */
  readonly natsUrl: string | undefined;
  /** BATON_EVENTSTORE_URL. Unset: the event store is Postgres. */
  readonly eventStoreUrl: string | undefined;
  readonly logLevel: LogLevel;
  /** BATON_API_HOST: where `baton api` listens. Anything but loopback needs BATON_API_TOKEN. */
  readonly apiHost: string;
  /** BATON_API_PORT. */
  readonly apiPort: number;
  /** Whether BATON_API_PORT was set: then a taken port is refused, where a taken default is replaced by a free one. */
  readonly apiPortSet: boolean;
  /** BATON_API_TOKEN: the admin bearer token (mutations). Secret: never log it. */
  readonly apiToken: string | undefined;
  /** BATON_API_READ_TOKEN: a bearer token for queries and subscriptions only. Secret: never log it. */
  readonly apiReadToken: string | undefined;
  readonly nodeEnv: 'development' | 'production' | 'test';
  /** Timeouts and retry defaults; each action may override its own (see src/actions/action.ts). */
  readonly timeouts: TimeoutConfig;
  /** What one request, one client and all clients together may take from the API. */
  readonly apiLimits: ApiLimits;
  /** BATON_API_INTROSPECTION: schema introspection and GraphiQL (on by default). */
  readonly apiIntrospection: boolean;
  /** BATON_EAGER_DISPATCH (on by default): an executor starts a handoff to a worker of its own process in the same append, without the transport (src/worker/eager-dispatch.ts). */
  readonly eagerDispatch: boolean;
  /** BATON_MIGRATE (on by default): every process brings the database up to date as it opens it; off: it refuses one that is not (`baton migrate` does it). */
  readonly migrate: boolean;
  /** BATON_HTTP_ALLOW: hosts, addresses and CIDR ranges http.request may reach although they are not public. */
  readonly httpAllow: readonly string[];
  /** BATON_NAMESPACE: the namespace CLI commands use when they are given no --namespace. Default `default`. */
  readonly namespace: string;
  /** BATON_DB_SCHEMA: the Postgres schema Baton's tables live in (its read model in `<schema>_read`); unset: public and baton_read. */
  readonly dbSchema: string | undefined;
  /** BATON_API_NAMESPACE_TOKENS: tokens scoped to namespaces (src/api/namespace-tokens.ts). Secret: never log it. */
  readonly apiNamespaceTokens: string | undefined;
  /** BATON_NAMESPACE_CONCURRENCY: executions of a namespace that may hold a slot at once (the executor enforces it). */
  readonly namespaceConcurrency: Readonly<Record<string, number>>;
  /** BATON_NAMESPACE_RATE_LIMIT: handoffs of a namespace per second or minute (the executor enforces it). */
  readonly namespaceRateLimits: Readonly<Record<string, RateLimitPolicy>>;
  /** BATON_RETENTION (off by default): the executor archives and removes finished work older than this (src/retention/). */
  readonly retention: RetentionConfig | undefined;
  /** BATON_PARTITIONS (default 16): how many partitions the executors split the work into; fixed by the installation's first executor (src/executor/partitions/). */
  readonly partitions: number;
}

export interface RetentionConfig {
  /** BATON_RETENTION: `90d` (the suggested value), `12h`, … */
  readonly olderThanMs: number;
  /** BATON_RETENTION_ARCHIVE: where archive files go; default <BATON_DATA_DIR>/archive. */
  readonly archiveDir: string;
  /** BATON_RETENTION_INTERVAL: how often the executor runs it; default 1h. */
  readonly intervalMs: number;
}

export interface ApiLimits {
  /** BATON_API_MAX_VALUE_BYTES: a larger JSON value inside a list comes back as a `$truncated` marker. */
  readonly maxValueBytes: number;
  /** BATON_API_MAX_RESPONSE_BYTES: a response that would be larger is refused. */
  readonly maxResponseBytes: number;
  /** BATON_API_MAX_SUBSCRIPTIONS: open subscriptions, all clients together. */
  readonly maxSubscriptions: number;
  /** BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: open subscriptions of one client address. */
  readonly maxSubscriptionsPerClient: number;
  /** BATON_API_MAX_CONNECTIONS: open HTTP connections; further ones are closed at once. */
  readonly maxConnections: number;
  /** BATON_API_HEADERS_TIMEOUT: a client must send its request headers within this long. */
  readonly headersTimeoutMs: number;
  /** BATON_API_REQUEST_TIMEOUT: ... and its whole request (the body) within this long. */
  readonly requestTimeoutMs: number;
  /** BATON_API_KEEP_ALIVE_TIMEOUT: an idle kept-alive connection is closed after this long. */
  readonly keepAliveTimeoutMs: number;
  /** BATON_API_MAX_BODY_BYTES: a larger request body is refused (413). */
  readonly maxBodyBytes: number;
  /** BATON_API_MAX_SUBMIT_BATCH: submissions one submitExecutions call may carry. */
  readonly maxSubmitBatch: number;
}

export interface TimeoutConfig {
  /** BATON_SCHEDULE_TO_START_TIMEOUT: a handed-off execution not started by then is reclaimed. */
  readonly scheduleToStartMs: number;
  /** BATON_START_TO_CLOSE_TIMEOUT: a run longer than this is aborted and timed out. */
  readonly startToCloseMs: number;
  /** BATON_HEARTBEAT_INTERVAL: how often workers beat. */
  readonly heartbeatIntervalMs: number;
  /** BATON_HEARTBEAT_STALE_AFTER: missed intervals after which a worker is declared lost. */
  readonly heartbeatStaleAfter: number;
  /** BATON_SHUTDOWN_TIMEOUT: how long a draining worker lets runs finish. */
  readonly shutdownTimeoutMs: number;
  /** BATON_MAX_ATTEMPTS: attempts of a submission that does not say, when its action sets no retry.maxAttempts. */
  readonly maxAttempts: number;
  /** BATON_NO_WORKER_TIMEOUT: an execution waiting this long while no live worker offers its action is abandoned. */
  readonly noWorkerTimeoutMs: number;
}

/** How long a worker may go without a heartbeat before it counts as lost. */
export const workerStaleAfterMs = (t: TimeoutConfig) => t.heartbeatIntervalMs * t.heartbeatStaleAfter;

export const DEFAULT_TIMEOUTS: TimeoutConfig = Object.freeze({
  scheduleToStartMs: 30_000,
  startToCloseMs: 10 * 60_000,
  heartbeatIntervalMs: 10_000,
  heartbeatStaleAfter: 3,
  shutdownTimeoutMs: 30_000,
  maxAttempts: 3,
  // Far past a deploy or a restart of every worker (minutes), so nothing submitted meanwhile is
  // lost to one; the wait is visible long before (baton status, /metrics).
  noWorkerTimeoutMs: 60 * 60_000,
});

/**
 * A CLI command waits this long for a database that refuses it (BATON_DB_WAIT unset): someone
 * at a terminal, or a script, wants an answer, where a host is supervised and keeps waiting.
 */
export const DEFAULT_CLI_DB_WAIT_MS = 10_000;

/** How long `who` waits for its database at start (BATON_DB_WAIT, else its default), and how that was set. */
export function dbWaitFor(config: Pick<Config, 'dbWaitMs'>, who: 'host' | 'cli'): { waitMs: number; setting: string } {
  if (config.dbWaitMs !== undefined) {
    return { waitMs: config.dbWaitMs, setting: `BATON_DB_WAIT=${config.dbWaitMs === Infinity ? 'forever' : `${config.dbWaitMs / 1000}s`}` };
  }
  return who === 'host'
    ? { waitMs: Infinity, setting: 'waiting for good; BATON_DB_WAIT bounds it' }
    : { waitMs: DEFAULT_CLI_DB_WAIT_MS, setting: `giving up after ${DEFAULT_CLI_DB_WAIT_MS / 1000} s; BATON_DB_WAIT changes it` };
}

// Sizes: 16 KiB keeps a page of 100 executions with every JSON field far below the response
// budget (100 × 4 fields × 16 KiB = 6.4 MiB < 8 MiB); 8 MiB is ~50 MiB of heap while it is built.
// Bodies: 1 MiB carries a submitExecutions batch of 1,000 with inputs of ~1 KB each (a
// submitExecution alone rarely needs more than a few KiB); yoga refuses larger ones from the
// Content-Length before reading them. Batches: 1,000 submissions are one appendMany, one
// transaction of ~1,000 rows, which commits in tens of milliseconds on the 2-core dev machine.
// Timeouts: headers and bodies of 1 MiB arrive from any client in well under 10 s.
export const DEFAULT_API_LIMITS: ApiLimits = Object.freeze({
  maxValueBytes: 16 * 1024,
  maxResponseBytes: 8 * 1024 * 1024,
  maxSubscriptions: 500,
  maxSubscriptionsPerClient: 50,
  maxConnections: 1_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxBodyBytes: 1024 * 1024,
  maxSubmitBatch: 1_000,
});

export const DEFAULT_DATA_DIR = './.baton';
export const DEFAULT_EMBEDDED_PG_PORT = 54329;
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 4000;

const EnvSchema = z.object({
  BATON_DATABASE_URL: z.preprocess(
    unsetIfEmpty,
    urlWith(['postgres', 'postgresql'], 'postgres://user:password@host:5432/database').optional(),
  ),
  BATON_DATA_DIR: z.preprocess(unsetIfEmpty, z.string().optional()),
  BATON_EMBEDDED_PG_PORT: z.preprocess(unsetIfEmpty, port.default(DEFAULT_EMBEDDED_PG_PORT)),
  BATON_NATS_URL: z.preprocess(unsetIfEmpty, urlWith(['nats', 'tls'], 'nats://host:4222').optional()),
  BATON_EVENTSTORE_URL: z.preprocess(
    unsetIfEmpty,
    urlWith(
      ['esdb', 'esdb+discover', 'kurrentdb', 'kurrentdb+discover', 'kurrent', 'kurrent+discover'],
      'esdb://host:2113?tls=false',
    ).optional(),
  ),
  BATON_LOG_LEVEL: z.preprocess(
    (v) => (typeof v === 'string' ? unsetIfEmpty(v.toLowerCase()) : v),
    z.enum(LOG_LEVELS, { message: `Invalid log level: expected one of ${LOG_LEVELS.join(', ')}` }).optional(),
  ),
  BATON_API_HOST: z.preprocess(unsetIfEmpty, z.string().trim().default(DEFAULT_API_HOST)),
  BATON_API_PORT: z.preprocess(unsetIfEmpty, port.default(DEFAULT_API_PORT)),
  BATON_DB_WAIT: waitDuration,
  BATON_API_TOKEN: z.preprocess(unsetIfEmpty, token.optional()),
  BATON_API_READ_TOKEN: z.preprocess(unsetIfEmpty, token.optional()),
  BATON_API_MAX_VALUE_BYTES: byteSize(DEFAULT_API_LIMITS.maxValueBytes, 256, 64 * 1024 ** 2),
  BATON_API_MAX_RESPONSE_BYTES: byteSize(DEFAULT_API_LIMITS.maxResponseBytes, 4 * 1024, 1024 ** 3),
  BATON_API_MAX_SUBSCRIPTIONS: count(DEFAULT_API_LIMITS.maxSubscriptions, 'number of subscriptions', 100_000),
  BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: count(DEFAULT_API_LIMITS.maxSubscriptionsPerClient, 'number of subscriptions', 100_000),
  BATON_API_MAX_CONNECTIONS: count(DEFAULT_API_LIMITS.maxConnections, 'number of connections', 1_000_000),
  BATON_API_HEADERS_TIMEOUT: duration(DEFAULT_API_LIMITS.headersTimeoutMs),
  BATON_API_REQUEST_TIMEOUT: duration(DEFAULT_API_LIMITS.requestTimeoutMs),
  BATON_API_KEEP_ALIVE_TIMEOUT: duration(DEFAULT_API_LIMITS.keepAliveTimeoutMs),
  BATON_API_MAX_BODY_BYTES: byteSize(DEFAULT_API_LIMITS.maxBodyBytes, 1024, 256 * 1024 ** 2),
  BATON_API_MAX_SUBMIT_BATCH: count(DEFAULT_API_LIMITS.maxSubmitBatch, 'number of submissions', 100_000),
  BATON_API_INTROSPECTION: onOff,
  BATON_EAGER_DISPATCH: onOff,
  BATON_MIGRATE: onOff,
  BATON_HTTP_ALLOW: hostAllowList,
  BATON_NAMESPACE: namespaceSetting,
  // A schema name Baton can interpolate (identifiers cannot be bound) and suffix with `_read`; short
  // enough that the LISTEN/NOTIFY channels it suffixes stay within 63 characters.
  BATON_DB_SCHEMA: dbSchemaSetting,
  BATON_API_NAMESPACE_TOKENS: z.preprocess(unsetIfEmpty, z.string().optional()),
  BATON_NAMESPACE_CONCURRENCY: namespaceLimitsSetting,
  BATON_NAMESPACE_RATE_LIMIT: namespaceRateLimitsSetting,
  BATON_SCHEDULE_TO_START_TIMEOUT: duration(DEFAULT_TIMEOUTS.scheduleToStartMs),
  BATON_START_TO_CLOSE_TIMEOUT: duration(DEFAULT_TIMEOUTS.startToCloseMs),
  BATON_HEARTBEAT_INTERVAL: duration(DEFAULT_TIMEOUTS.heartbeatIntervalMs),
  BATON_HEARTBEAT_STALE_AFTER: count(DEFAULT_TIMEOUTS.heartbeatStaleAfter, 'number of missed heartbeat intervals'),
  BATON_SHUTDOWN_TIMEOUT: duration(DEFAULT_TIMEOUTS.shutdownTimeoutMs),
  BATON_MAX_ATTEMPTS: count(DEFAULT_TIMEOUTS.maxAttempts, 'number of attempts'),
  BATON_NO_WORKER_TIMEOUT: duration(DEFAULT_TIMEOUTS.noWorkerTimeoutMs),
  BATON_RETENTION: retentionSetting,
  BATON_RETENTION_ARCHIVE: z.preprocess(unsetIfEmpty, z.string().optional()),
  BATON_RETENTION_INTERVAL: duration(3_600_000),
  BATON_PARTITIONS: count(16, 'number of partitions', 4096),
  NODE_ENV: z.preprocess(
    unsetIfEmpty,
    z
      .enum(['development', 'production', 'test'], {
        message: 'Invalid value: expected development, production or test',
      })
      .default('production'),
  ),
});

/**
 * BATON_* variables that are not Baton's configuration, so an unknown one is not refused:
 * Docker Compose's (the env file to read, the ports to publish; see .env.example), the test
 * harness's (config-test-harness.ts, and the browser test's screenshot switch) and bin/baton.js's.
 */
export const NON_CONFIG_VARIABLES: readonly string[] = [
  'BATON_ENV_FILE',
  'BATON_COMPOSE_PG_PORT',
  'BATON_COMPOSE_NATS_PORT',
  'BATON_COMPOSE_NATS_MONITOR_PORT',
  'BATON_COMPOSE_API_PORT',
  'BATON_COMPOSE_ESDB_PORT',
  'BATON_REQUIRE_NATS',
  'BATON_UI_SCREENSHOT_TO_DOCS',
  // bin/baton.js's, for the `baton` processes it starts: it said already that it runs the sources.
  'BATON_SOURCES_NOTICE_SHOWN',
];

/** Whether `name` is one of Baton's configuration variables (a BATON_* name loadConfig reads). */
export const isConfigVariable = (name: string): boolean => name.startsWith('BATON_') && name in EnvSchema.shape;

/** A misspelt BATON_* variable would silently leave its setting at the default: name it, and the one probably meant. */
function unknownVariables(env: NodeJS.ProcessEnv): string[] {
  const known = Object.keys(EnvSchema.shape).filter((k) => k.startsWith('BATON_'));
  return Object.keys(env)
    .filter((k) => k.startsWith('BATON_') && !isConfigVariable(k) && !NON_CONFIG_VARIABLES.includes(k))
    .sort()
    .map((k) => `${k}: ${unknownNameMessage('variable', k, known).replace(/; known: .*$/, '')}`);
}

/** The variables `schema` reads, or ConfigError naming each problem (and `extra` ones). */
export function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv, extra: string[] = []): z.infer<S> {
  const result = schema.safeParse(env);
  const problems = [...(result.success ? [] : result.error.issues.map((i) => `${i.path.map(String).join('.') || '(environment)'}: ${i.message}`)), ...extra];
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return result.data as z.infer<S>;
}

/** What differs between the hosts and the commands that run and end (src/cli/context.ts). */
export interface ConfigDefaults {
  /** The level when BATON_LOG_LEVEL is unset. Default info (the hosts); CLI commands pass warn. */
  logLevel?: LogLevel;
}

/**
 * Parse the environment into a complete Config. Throws ConfigError naming every bad
 * variable (`BATON_DATABASE_URL: Invalid url: expected postgres://…`).
 * `cwd` is what a relative BATON_DATA_DIR is resolved against.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd(), defaults: ConfigDefaults = {}): Config {
  const e = parseEnv(EnvSchema, env, unknownVariables(env));
  const { dataDir, dataDirFrom } =
    e.BATON_DATA_DIR === undefined ? defaultDataDir(cwd) : { dataDir: path.resolve(cwd, e.BATON_DATA_DIR), dataDirFrom: 'BATON_DATA_DIR' as const };
  const config = {
    databaseUrl: e.BATON_DATABASE_URL,
    dataDir,
    dataDirFrom,
    embeddedPgPort: e.BATON_EMBEDDED_PG_PORT,
    embeddedPgPortSet: unsetIfEmpty(env.BATON_EMBEDDED_PG_PORT) !== undefined,
    dbWaitMs: e.BATON_DB_WAIT,
    natsUrl: e.BATON_NATS_URL,
    eventStoreUrl: e.BATON_EVENTSTORE_URL,
    logLevel: e.BATON_LOG_LEVEL ?? defaults.logLevel ?? 'info',
    apiHost: e.BATON_API_HOST,
    apiPort: e.BATON_API_PORT,
    apiPortSet: unsetIfEmpty(env.BATON_API_PORT) !== undefined,
    nodeEnv: e.NODE_ENV,
    apiLimits: apiLimitsOf(e),
    apiIntrospection: e.BATON_API_INTROSPECTION,
    eagerDispatch: e.BATON_EAGER_DISPATCH,
    migrate: e.BATON_MIGRATE,
    partitions: e.BATON_PARTITIONS,
    httpAllow: Object.freeze(e.BATON_HTTP_ALLOW),
    namespace: e.BATON_NAMESPACE,
    dbSchema: e.BATON_DB_SCHEMA,
    namespaceConcurrency: Object.freeze(e.BATON_NAMESPACE_CONCURRENCY),
    namespaceRateLimits: Object.freeze(e.BATON_NAMESPACE_RATE_LIMIT),
    retention:
      e.BATON_RETENTION === undefined
        ? undefined
        : Object.freeze({
            olderThanMs: e.BATON_RETENTION,
            archiveDir: path.resolve(cwd, e.BATON_RETENTION_ARCHIVE ?? path.join(dataDir, 'archive')),
            intervalMs: e.BATON_RETENTION_INTERVAL,
          }),
    timeouts: Object.freeze({
      scheduleToStartMs: e.BATON_SCHEDULE_TO_START_TIMEOUT,
      startToCloseMs: e.BATON_START_TO_CLOSE_TIMEOUT,
      heartbeatIntervalMs: e.BATON_HEARTBEAT_INTERVAL,
      heartbeatStaleAfter: e.BATON_HEARTBEAT_STALE_AFTER,
      shutdownTimeoutMs: e.BATON_SHUTDOWN_TIMEOUT,
      maxAttempts: e.BATON_MAX_ATTEMPTS,
      noWorkerTimeoutMs: e.BATON_NO_WORKER_TIMEOUT,
    }),
  } as Config;
  // Secrets are not enumerable: logging or serialising the Config (JSON, pino, util.inspect)
  // leaves them out, while code that asks for config.apiToken still gets it.
  Object.defineProperties(config, {
    apiToken: { value: e.BATON_API_TOKEN, enumerable: false },
    apiReadToken: { value: e.BATON_API_READ_TOKEN, enumerable: false },
    apiNamespaceTokens: { value: e.BATON_API_NAMESPACE_TOKENS, enumerable: false },
  });
  return Object.freeze(config);
}

function apiLimitsOf(e: z.infer<typeof EnvSchema>): ApiLimits {
  if (e.BATON_API_MAX_VALUE_BYTES > e.BATON_API_MAX_RESPONSE_BYTES) {
    throw new ConfigError('invalid configuration: BATON_API_MAX_VALUE_BYTES: must not be larger than BATON_API_MAX_RESPONSE_BYTES');
  }
  if (e.BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT > e.BATON_API_MAX_SUBSCRIPTIONS) {
    throw new ConfigError('invalid configuration: BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: must not be larger than BATON_API_MAX_SUBSCRIPTIONS');
  }
  if (e.BATON_API_HEADERS_TIMEOUT > e.BATON_API_REQUEST_TIMEOUT) {
    throw new ConfigError('invalid configuration: BATON_API_HEADERS_TIMEOUT: must not be longer than BATON_API_REQUEST_TIMEOUT (the headers are part of the request)');
  }
  return Object.freeze({
    maxValueBytes: e.BATON_API_MAX_VALUE_BYTES,
    maxResponseBytes: e.BATON_API_MAX_RESPONSE_BYTES,
    maxSubscriptions: e.BATON_API_MAX_SUBSCRIPTIONS,
    maxSubscriptionsPerClient: e.BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT,
    maxConnections: e.BATON_API_MAX_CONNECTIONS,
    headersTimeoutMs: e.BATON_API_HEADERS_TIMEOUT,
    requestTimeoutMs: e.BATON_API_REQUEST_TIMEOUT,
    keepAliveTimeoutMs: e.BATON_API_KEEP_ALIVE_TIMEOUT,
    maxBodyBytes: e.BATON_API_MAX_BODY_BYTES,
    maxSubmitBatch: e.BATON_API_MAX_SUBMIT_BATCH,
  });
}
