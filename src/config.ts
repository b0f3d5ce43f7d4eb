// The only module that reads process.env. Every variable is parsed once, here, into a
// complete typed Config (defaults applied, paths resolved), in the spirit of Temporal's
// WorkerOptions -> CompiledWorkerOptions; the rest of the code takes a Config.
import path from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.ts';
import { unknownNameMessage } from './input/nearest.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  /** BATON_DATABASE_URL. Unset: Baton runs its embedded Postgres (src/db/embedded.ts). */
  readonly databaseUrl: string | undefined;
  /** BATON_DATA_DIR, absolute. Holds the embedded Postgres cluster (`<dataDir>/postgres`). */
  readonly dataDir: string;
  /** BATON_EMBEDDED_PG_PORT: where the embedded Postgres listens (127.0.0.1 only). */
  readonly embeddedPgPort: number;
  /** BATON_NATS_URL. Unset: work goes through the Postgres queue. */
  readonly natsUrl: string | undefined;
  /** BATON_EVENTSTORE_URL. Unset: the event store is Postgres. */
  readonly eventStoreUrl: string | undefined;
  readonly logLevel: LogLevel;
  /** BATON_API_HOST: where `baton api` listens. Anything but loopback needs BATON_API_TOKEN. */
  readonly apiHost: string;
  /** BATON_API_PORT. */
  readonly apiPort: number;
  /** BATON_API_TOKEN: the admin bearer token (mutations). Secret: never log it. */
  readonly apiToken: string | undefined;
  /** BATON_API_READ_TOKEN: a bearer token for queries and subscriptions only. Secret: never log it. */
  readonly apiReadToken: string | undefined;
  readonly nodeEnv: 'development' | 'production' | 'test';
  /** Timeouts and retry defaults; each action may override its own (see src/actions/action.ts). */
  readonly timeouts: TimeoutConfig;
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
  /** BATON_MAX_ATTEMPTS: attempts of a submission that does not say. */
  readonly maxAttempts: number;
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
});

export const DEFAULT_DATA_DIR = './.baton';
export const DEFAULT_EMBEDDED_PG_PORT = 54329;
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_API_HOST = '127.0.0.1';
export const DEFAULT_API_PORT = 4000;

// `FOO=` in a shell, a compose file or a .env means "not set", not "set to the empty string".
const unsetIfEmpty = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);

const urlWith = (protocols: string[], example: string) =>
  z.string().refine(
    (value) => {
      try {
        return protocols.includes(new URL(value).protocol.replace(/:$/, ''));
      } catch {
        return false;
      }
    },
    // Never echo the value: a database URL carries a password.
    { message: `Invalid url: expected ${example}` },
  );

const port = z.coerce
  .number({ message: 'Invalid port: expected an integer from 1 to 65535' })
  .int('Invalid port: expected an integer from 1 to 65535')
  .min(1, 'Invalid port: expected an integer from 1 to 65535')
  .max(65535, 'Invalid port: expected an integer from 1 to 65535');

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
/** `250ms`, `5s`, `1.5m`, `2h`; a bare number is milliseconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]) * DURATION_UNITS[m[2] ?? 'ms']!;
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}
const duration = (fallback: number) =>
  z.preprocess(
    unsetIfEmpty,
    z
      .string()
      .transform((v, ctx) => {
        const ms = parseDuration(v);
        if (ms === undefined || ms < 1 || ms > 7 * 24 * 3_600_000) {
          ctx.addIssue({ code: 'custom', message: `Invalid duration "${v}": expected e.g. 500ms, 5s, 2m or 1h (at least 1 ms, at most 7 days)` });
          return z.NEVER;
        }
        return ms;
      })
      .optional(),
  ).transform((v) => v ?? fallback);
const count = (fallback: number, what: string) =>
  z.preprocess(
    unsetIfEmpty,
    z.coerce
      .number({ message: `Invalid ${what}: expected a whole number from 1 to 1000` })
      .int(`Invalid ${what}: expected a whole number from 1 to 1000`)
      .min(1, `Invalid ${what}: expected a whole number from 1 to 1000`)
      .max(1000, `Invalid ${what}: expected a whole number from 1 to 1000`)
      .default(fallback),
  );

// A token travels in an Authorization header: one visible-ASCII word. Messages never echo it.
const token = z
  .string()
  .regex(/^[\x21-\x7e]+$/, 'Invalid token: expected printable ASCII without spaces')
  .max(1024, 'Invalid token: expected at most 1024 characters');

const EnvSchema = z.object({
  BATON_DATABASE_URL: z.preprocess(
    unsetIfEmpty,
    urlWith(['postgres', 'postgresql'], 'postgres://user:password@host:5432/database').optional(),
  ),
  BATON_DATA_DIR: z.preprocess(unsetIfEmpty, z.string().default(DEFAULT_DATA_DIR)),
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
    z.enum(LOG_LEVELS, { message: `Invalid log level: expected one of ${LOG_LEVELS.join(', ')}` }).default('info'),
  ),
  BATON_API_HOST: z.preprocess(unsetIfEmpty, z.string().trim().default(DEFAULT_API_HOST)),
  BATON_API_PORT: z.preprocess(unsetIfEmpty, port.default(DEFAULT_API_PORT)),
  BATON_API_TOKEN: z.preprocess(unsetIfEmpty, token.optional()),
  BATON_API_READ_TOKEN: z.preprocess(unsetIfEmpty, token.optional()),
  BATON_SCHEDULE_TO_START_TIMEOUT: duration(DEFAULT_TIMEOUTS.scheduleToStartMs),
  BATON_START_TO_CLOSE_TIMEOUT: duration(DEFAULT_TIMEOUTS.startToCloseMs),
  BATON_HEARTBEAT_INTERVAL: duration(DEFAULT_TIMEOUTS.heartbeatIntervalMs),
  BATON_HEARTBEAT_STALE_AFTER: count(DEFAULT_TIMEOUTS.heartbeatStaleAfter, 'number of missed heartbeat intervals'),
  BATON_SHUTDOWN_TIMEOUT: duration(DEFAULT_TIMEOUTS.shutdownTimeoutMs),
  BATON_MAX_ATTEMPTS: count(DEFAULT_TIMEOUTS.maxAttempts, 'number of attempts'),
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
 * Docker Compose's (the env file to read, the ports to publish; see .env.example) and the test
 * harness's (TestEnvSchema below, and the browser test's screenshot switch).
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
];

/** A misspelt BATON_* variable would silently leave its setting at the default: name it, and the one probably meant. */
function unknownVariables(env: NodeJS.ProcessEnv): string[] {
  const known = Object.keys(EnvSchema.shape).filter((k) => k.startsWith('BATON_'));
  return Object.keys(env)
    .filter((k) => k.startsWith('BATON_') && !known.includes(k) && !NON_CONFIG_VARIABLES.includes(k))
    .sort()
    .map((k) => `${k}: ${unknownNameMessage('variable', k, known).replace(/; known: .*$/, '')}`);
}

function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv, extra: string[] = []): z.infer<S> {
  const result = schema.safeParse(env);
  const problems = [...(result.success ? [] : result.error.issues.map((i) => `${i.path.map(String).join('.') || '(environment)'}: ${i.message}`)), ...extra];
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return result.data as z.infer<S>;
}

/**
 * Parse the environment into a complete Config. Throws ConfigError naming every bad
 * variable (`BATON_DATABASE_URL: Invalid url: expected postgres://…`).
 * `cwd` is what a relative BATON_DATA_DIR is resolved against.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): Config {
  const e = parseEnv(EnvSchema, env, unknownVariables(env));
  const config = {
    databaseUrl: e.BATON_DATABASE_URL,
    dataDir: path.resolve(cwd, e.BATON_DATA_DIR),
    embeddedPgPort: e.BATON_EMBEDDED_PG_PORT,
    natsUrl: e.BATON_NATS_URL,
    eventStoreUrl: e.BATON_EVENTSTORE_URL,
    logLevel: e.BATON_LOG_LEVEL,
    apiHost: e.BATON_API_HOST,
    apiPort: e.BATON_API_PORT,
    nodeEnv: e.NODE_ENV,
    timeouts: Object.freeze({
      scheduleToStartMs: e.BATON_SCHEDULE_TO_START_TIMEOUT,
      startToCloseMs: e.BATON_START_TO_CLOSE_TIMEOUT,
      heartbeatIntervalMs: e.BATON_HEARTBEAT_INTERVAL,
      heartbeatStaleAfter: e.BATON_HEARTBEAT_STALE_AFTER,
      shutdownTimeoutMs: e.BATON_SHUTDOWN_TIMEOUT,
      maxAttempts: e.BATON_MAX_ATTEMPTS,
    }),
  } as Config;
  // Secrets are not enumerable: logging or serialising the Config (JSON, pino, util.inspect)
  // leaves them out, while code that asks for config.apiToken still gets it.
  Object.defineProperties(config, {
    apiToken: { value: e.BATON_API_TOKEN, enumerable: false },
    apiReadToken: { value: e.BATON_API_READ_TOKEN, enumerable: false },
  });
  return Object.freeze(config);
}

/** What the test harness (test/support) reads besides Config. */
export interface TestHarnessConfig {
  /** BATON_REQUIRE_NATS=1: fail the whole test run when NATS is unreachable instead of skipping NATS tests. */
  readonly requireNats: boolean;
  /** BATON_NATS_URL, or nats://127.0.0.1:4222. */
  readonly natsUrl: string;
  /** CI is set (to anything but "" / "0" / "false"). */
  readonly ci: boolean;
}

const flag = (name: string) =>
  z.preprocess(
    (v) => (typeof v === 'string' ? unsetIfEmpty(v.toLowerCase()) : v),
    z
      .enum(['1', '0', 'true', 'false', 'yes', 'no'], { message: `Invalid flag: expected 1 or 0 (${name})` })
      .optional()
      .transform((v) => v === '1' || v === 'true' || v === 'yes'),
  );

const TestEnvSchema = z.object({
  BATON_REQUIRE_NATS: flag('BATON_REQUIRE_NATS'),
  BATON_NATS_URL: z.preprocess(unsetIfEmpty, urlWith(['nats', 'tls'], 'nats://host:4222').default(DEFAULT_NATS_URL)),
  // CI systems set CI to all sorts of values ("true", "1", "woodpecker"); only "", "0" and "false" mean no.
  CI: z.preprocess(unsetIfEmpty, z.string().optional()).transform((v) => v !== undefined && !['0', 'false'].includes(v.toLowerCase())),
});

export function loadTestHarnessConfig(env: NodeJS.ProcessEnv = process.env): TestHarnessConfig {
  const e = parseEnv(TestEnvSchema, env);
  return Object.freeze({ requireNats: e.BATON_REQUIRE_NATS, natsUrl: e.BATON_NATS_URL, ci: e.CI });
}
