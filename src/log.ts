// The one root pino logger. Components take a child through componentLogger (`"component":
// "dev/executor/partitions"`) and executions a child of that; never bind user input at the top level.
import { createRequire } from 'node:module';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config, LogLevel } from './config.ts';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: LogLevel;
  /** Human-readable output via pino-pretty (a devDependency); falls back to JSON when it is not installed. */
  pretty?: boolean;
  /**
   * Long-running hosts log JSON to stdout (what log collectors read). CLI commands print
   * their results on stdout, so they log to stderr to keep stdout parseable.
   */
  destination?: 'stdout' | 'stderr';
}

/** The options a Config implies: pretty only when NODE_ENV=development (STYLE.md, Logging). */
export function loggerOptions(config: Pick<Config, 'logLevel' | 'nodeEnv'>, overrides: Partial<LoggerOptions> = {}): LoggerOptions {
  return { level: config.logLevel, pretty: config.nodeEnv === 'development', destination: 'stdout', ...overrides };
}

/**
 * The root logger. Pass the Config (`createLogger(config, { destination: 'stderr' })` in a
 * CLI command) or explicit options (`createLogger({ level: 'debug' })`).
 */
export function createLogger(
  source: LoggerOptions | Pick<Config, 'logLevel' | 'nodeEnv'>,
  overrides: Partial<LoggerOptions> = {},
): Logger {
  const options = 'logLevel' in source ? loggerOptions(source, overrides) : { ...source, ...overrides };
  const fd = options.destination === 'stderr' ? 2 : 1;
  const stream = (options.pretty ? prettyStream(fd) : undefined) ?? jsonStream(fd);
  return pino({ level: options.level, base: { pid: process.pid } }, stream);
}

/** On a component's logger: the logger its first component was made from (plain children inherit it: pino's children are made with Object.create). */
const ROOT = Symbol('baton.componentRoot');
type Tracked = Logger & { [ROOT]?: Logger };

/**
 * The logger of component `name` of `log` (a part of a component names its path: `dev/executor`).
 * Its lines carry `component` once: pino never replaces a binding, so `log.child({ component })`
 * on a component's logger wrote the key once per level, and JSON parsers keep only the last one
 * (some log pipelines refuse the line). A part is made from the first component's parent with
 * what `log` says (its bindings, its level), so nothing of the levels between is lost.
 */
export function componentLogger(log: Logger, name: string, bindings: Record<string, unknown> = {}): Logger {
  const root = (log as Tracked)[ROOT];
  let child: Tracked;
  if (!root) {
    child = log.child({ component: name, ...bindings });
    child[ROOT] = log;
    return child;
  }
  const { component, ...above } = log.bindings();
  for (const key of Object.keys(root.bindings())) delete above[key]; // the root writes its own
  child = root.child({ component: `${String(component)}/${name}`, ...above, ...bindings }, { level: log.level });
  child[ROOT] = root;
  return child;
}

/** A logger that drops everything: for library callers and tests that do not care. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

function jsonStream(fd: 1 | 2): DestinationStream {
  // Synchronous writes: a CLI that calls process.exit() right after logging must not lose the line.
  return pino.destination({ dest: fd, sync: true });
}

function prettyStream(fd: 1 | 2): DestinationStream | undefined {
  // Loaded lazily and synchronously (pino-pretty is CommonJS) so that production installs,
  // which omit devDependencies, never need it and createLogger() stays synchronous.
  try {
    const require = createRequire(import.meta.url);
    const pretty = require('pino-pretty') as (opts: Record<string, unknown>) => DestinationStream;
    return pretty({ destination: fd, sync: true, colorize: fd === 1 ? process.stdout.isTTY : process.stderr.isTTY });
  } catch {
    return undefined;
  }
}
