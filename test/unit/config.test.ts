// Config parsing and the root logger: pure, no servers (kept here beside the db plumbing it feeds).
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { loadConfig, loadTestHarnessConfig, DEFAULT_TIMEOUTS, parseDuration } from '../../src/config.ts';
import { createLogger, loggerOptions } from '../../src/log.ts';

describe('loadConfig', () => {
  it('fills in every default, resolving the data dir against cwd', () => {
    expect(loadConfig({}, '/srv/app')).toEqual({
      databaseUrl: undefined,
      dataDir: '/srv/app/.baton',
      embeddedPgPort: 54329,
      natsUrl: undefined,
      eventStoreUrl: undefined,
      logLevel: 'info',
      apiHost: '127.0.0.1',
      apiPort: 4000,
      nodeEnv: 'production',
      timeouts: DEFAULT_TIMEOUTS,
    });
    const config = loadConfig({}, '/srv/app');
    expect(config.apiToken).toBeUndefined();
    expect(config.apiReadToken).toBeUndefined();
  });

  it('reads every variable', () => {
    const config = loadConfig(
      {
        BATON_DATABASE_URL: 'postgresql://u:p@db:5432/baton',
        BATON_DATA_DIR: 'var/baton',
        BATON_EMBEDDED_PG_PORT: '6000',
        BATON_NATS_URL: 'nats://nats:4222',
        BATON_EVENTSTORE_URL: 'esdb://esdb:2113?tls=false',
        BATON_LOG_LEVEL: 'DEBUG',
        NODE_ENV: 'development',
      },
      '/home/me',
    );
    expect(config).toMatchObject({
      databaseUrl: 'postgresql://u:p@db:5432/baton',
      dataDir: path.resolve('/home/me', 'var/baton'),
      embeddedPgPort: 6000,
      natsUrl: 'nats://nats:4222',
      eventStoreUrl: 'esdb://esdb:2113?tls=false',
      logLevel: 'debug',
      nodeEnv: 'development',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('takes the default log level from the caller (warn for CLI commands); BATON_LOG_LEVEL still wins', () => {
    expect(loadConfig({}, '/srv', { logLevel: 'warn' }).logLevel).toBe('warn');
    expect(loadConfig({ BATON_LOG_LEVEL: '' }, '/srv', { logLevel: 'warn' }).logLevel).toBe('warn');
    expect(loadConfig({ BATON_LOG_LEVEL: 'info' }, '/srv', { logLevel: 'warn' }).logLevel).toBe('info');
    expect(loadConfig({}, '/srv').logLevel).toBe('info');
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig({ BATON_DATABASE_URL: '', BATON_EMBEDDED_PG_PORT: ' ', NODE_ENV: '' }, '/x')).toMatchObject({
      databaseUrl: undefined,
      embeddedPgPort: 54329,
      nodeEnv: 'production',
    });
  });

  it('names every bad variable, and never echoes a value (URLs carry passwords)', () => {
    const err = (() => {
      try {
        loadConfig({
          BATON_DATABASE_URL: 'mysql://root:hunter2@db/x',
          BATON_EMBEDDED_PG_PORT: '70000',
          BATON_NATS_URL: 'not a url',
          BATON_LOG_LEVEL: 'loud',
        });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toMatch(/BATON_DATABASE_URL: Invalid url: expected postgres:\/\//);
    expect(message).toMatch(/BATON_EMBEDDED_PG_PORT: Invalid port/);
    expect(message).toMatch(/BATON_NATS_URL: Invalid url/);
    expect(message).toMatch(/BATON_LOG_LEVEL: Invalid log level/);
    expect(message).not.toContain('hunter2');
  });

  it('reads the API variables, keeping its tokens out of anything that serialises the Config', () => {
    const config = loadConfig({
      BATON_API_HOST: '0.0.0.0',
      BATON_API_PORT: '8080',
      BATON_API_TOKEN: 'admin-s3cret-token',
      BATON_API_READ_TOKEN: 'read-s3cret-token',
    });
    expect(config).toMatchObject({ apiHost: '0.0.0.0', apiPort: 8080 });
    expect(config.apiToken).toBe('admin-s3cret-token');
    expect(config.apiReadToken).toBe('read-s3cret-token');
    expect(JSON.stringify(config)).not.toMatch(/s3cret/);
    expect(inspect(config)).not.toMatch(/s3cret/);
    expect(Object.isFrozen(config)).toBe(true);
    expect(loadConfig({ BATON_API_TOKEN: ' ', BATON_API_HOST: '' })).toMatchObject({ apiHost: '127.0.0.1' });
    expect(loadConfig({ BATON_API_TOKEN: '' }).apiToken).toBeUndefined();
  });

  it('names a bad API variable without echoing a token', () => {
    expect(() => loadConfig({ BATON_API_PORT: '0' })).toThrow(/BATON_API_PORT: Invalid port/);
    expect(() => loadConfig({ BATON_API_PORT: 'http' })).toThrow(/BATON_API_PORT: Invalid port/);
    const err = (() => {
      try {
        loadConfig({ BATON_API_TOKEN: 'two words-hunter2', BATON_API_READ_TOKEN: 'x'.repeat(2000) });
      } catch (e) {
        return e as Error;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err!.message).toMatch(/BATON_API_TOKEN: Invalid token/);
    expect(err!.message).toMatch(/BATON_API_READ_TOKEN: Invalid token/);
    expect(err!.message).not.toContain('hunter2');
  });

  it('reads timeouts as durations, with defaults, and names a bad one', () => {
    expect(loadConfig({}).timeouts).toEqual(DEFAULT_TIMEOUTS);
    const t = loadConfig({
      BATON_SCHEDULE_TO_START_TIMEOUT: '2s',
      BATON_START_TO_CLOSE_TIMEOUT: '1.5m',
      BATON_HEARTBEAT_INTERVAL: '500ms',
      BATON_HEARTBEAT_STALE_AFTER: '4',
      BATON_SHUTDOWN_TIMEOUT: '1h',
      BATON_MAX_ATTEMPTS: '7',
    }).timeouts;
    expect(t).toEqual({ scheduleToStartMs: 2_000, startToCloseMs: 90_000, heartbeatIntervalMs: 500, heartbeatStaleAfter: 4, shutdownTimeoutMs: 3_600_000, maxAttempts: 7 });
    expect(loadConfig({ BATON_SHUTDOWN_TIMEOUT: '250' }).timeouts.shutdownTimeoutMs).toBe(250);
    expect(() => loadConfig({ BATON_SCHEDULE_TO_START_TIMEOUT: 'soon' })).toThrow(/BATON_SCHEDULE_TO_START_TIMEOUT: Invalid duration "soon"/);
    expect(() => loadConfig({ BATON_HEARTBEAT_INTERVAL: '0s' })).toThrow(/BATON_HEARTBEAT_INTERVAL: Invalid duration/);
    expect(() => loadConfig({ BATON_MAX_ATTEMPTS: '0' })).toThrow(/BATON_MAX_ATTEMPTS: Invalid number of attempts/);
    expect(() => loadConfig({ BATON_HEARTBEAT_STALE_AFTER: '2.5' })).toThrow(/BATON_HEARTBEAT_STALE_AFTER/);
    expect(parseDuration('5s')).toBe(5_000);
    expect(parseDuration('5 sec')).toBeUndefined();
  });

  it('reads the test harness flags', () => {
    expect(loadTestHarnessConfig({})).toEqual({ requireNats: false, natsUrl: 'nats://127.0.0.1:4222', ci: false });
    expect(loadTestHarnessConfig({ BATON_REQUIRE_NATS: '1', CI: 'true', BATON_NATS_URL: 'nats://n:4222' })).toEqual({
      requireNats: true,
      natsUrl: 'nats://n:4222',
      ci: true,
    });
    expect(() => loadTestHarnessConfig({ BATON_REQUIRE_NATS: 'maybe' })).toThrow(/BATON_REQUIRE_NATS: Invalid flag/);
  });
});

describe('createLogger', () => {
  it('is pretty only in development, and logs where it is told', () => {
    expect(loggerOptions({ logLevel: 'warn', nodeEnv: 'production' })).toEqual({ level: 'warn', pretty: false, destination: 'stdout' });
    expect(loggerOptions({ logLevel: 'info', nodeEnv: 'development' }, { destination: 'stderr' })).toMatchObject({
      pretty: true,
      destination: 'stderr',
    });
    const log = createLogger({ logLevel: 'warn', nodeEnv: 'test' }, { destination: 'stderr' });
    expect(log.level).toBe('warn');
    expect(createLogger({ level: 'debug' }).isLevelEnabled('debug')).toBe(true);
  });
});
