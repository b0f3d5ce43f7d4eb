// Config parsing and the root logger: pure, no servers (kept here beside the db plumbing it feeds).
import path from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { loadTestHarnessConfig } from '../../src/config-test-harness.ts';
import { dbWaitFor, loadConfig, DEFAULT_API_LIMITS, DEFAULT_CLI_DB_WAIT_MS, DEFAULT_TIMEOUTS, parseByteSize, parseDuration } from '../../src/config.ts';
import { createLogger, loggerOptions } from '../../src/log.ts';

describe('loadConfig', () => {
  it('fills in every default, resolving the data dir against cwd', () => {
    expect(loadConfig({}, '/srv/app')).toEqual({
      databaseUrl: undefined,
      dataDir: '/srv/app/.baton',
      dataDirFrom: 'cwd',
      embeddedPgPort: 54329,
      embeddedPgPortSet: false,
      dbWaitMs: undefined,
      natsUrl: undefined,
      eventStoreUrl: undefined,
      logLevel: 'info',
      apiHost: '127.0.0.1',
      apiPort: 4000,
      apiPortSet: false,
      nodeEnv: 'production',
      timeouts: DEFAULT_TIMEOUTS,
      apiLimits: DEFAULT_API_LIMITS,
      apiIntrospection: true,
      eagerDispatch: true,
      migrate: true,
      httpAllow: [],
      namespace: 'default',
      dbSchema: undefined,
      namespaceConcurrency: {},
      namespaceRateLimits: {},
      retention: undefined,
      partitions: 16,
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

  it('reads BATON_RETENTION: off by default and with `off`, an age otherwise; refuses anything else naming the variable', () => {
    expect(loadConfig({ BATON_RETENTION: 'off' }, '/srv/app').retention).toBeUndefined();
    expect(loadConfig({ BATON_RETENTION: '90d' }, '/srv/app').retention).toEqual({ olderThanMs: 90 * 86_400_000, archiveDir: '/srv/app/.baton/archive', intervalMs: 3_600_000 });
    expect(loadConfig({ BATON_RETENTION: '12h', BATON_RETENTION_ARCHIVE: 'arch', BATON_RETENTION_INTERVAL: '5m' }, '/srv/app').retention).toEqual({ olderThanMs: 12 * 3_600_000, archiveDir: '/srv/app/arch', intervalMs: 300_000 });
    for (const bad of ['90', '90 days', '0d', '-1d', '1000000000d', 'on']) {
      expect(() => loadConfig({ BATON_RETENTION: bad }, '/srv/app'), bad).toThrow(/BATON_RETENTION: Invalid age: expected off or an age such as 90d/);
    }
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

  it('says whether a port was asked for, so that only a default port is swapped for a free one when taken', () => {
    expect(loadConfig({ BATON_API_PORT: '4000', BATON_EMBEDDED_PG_PORT: '54329' })).toMatchObject({ apiPortSet: true, embeddedPgPortSet: true });
    expect(loadConfig({ BATON_API_PORT: ' ', BATON_EMBEDDED_PG_PORT: '' })).toMatchObject({ apiPortSet: false, embeddedPgPortSet: false });
  });

  it('reads BATON_DB_WAIT: forever, 0 (one try) or a duration; unset, hosts wait for good and CLI commands 10 s', () => {
    expect(loadConfig({ BATON_DB_WAIT: 'forever' }).dbWaitMs).toBe(Infinity);
    expect(loadConfig({ BATON_DB_WAIT: '0' }).dbWaitMs).toBe(0);
    expect(loadConfig({ BATON_DB_WAIT: '90s' }).dbWaitMs).toBe(90_000);
    expect(loadConfig({ BATON_DB_WAIT: '' }).dbWaitMs).toBeUndefined();
    expect(() => loadConfig({ BATON_DB_WAIT: 'a while' })).toThrow(/BATON_DB_WAIT: Invalid wait "a while": expected forever, 0/);
    expect(() => loadConfig({ BATON_DB_WAIT: '-5s' })).toThrow(/BATON_DB_WAIT: Invalid wait/);

    const unset = loadConfig({});
    expect(dbWaitFor(unset, 'host').waitMs).toBe(Infinity);
    expect(dbWaitFor(unset, 'cli').waitMs).toBe(DEFAULT_CLI_DB_WAIT_MS);
    const set = loadConfig({ BATON_DB_WAIT: '2m' });
    expect(dbWaitFor(set, 'host')).toEqual({ waitMs: 120_000, setting: 'BATON_DB_WAIT=120s' });
    expect(dbWaitFor(set, 'cli').waitMs).toBe(120_000);
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
      BATON_NO_WORKER_TIMEOUT: '15m',
    }).timeouts;
    expect(t).toEqual({ scheduleToStartMs: 2_000, startToCloseMs: 90_000, heartbeatIntervalMs: 500, heartbeatStaleAfter: 4, shutdownTimeoutMs: 3_600_000, maxAttempts: 7, noWorkerTimeoutMs: 900_000 });
    expect(DEFAULT_TIMEOUTS.noWorkerTimeoutMs).toBe(3_600_000);
    expect(loadConfig({ BATON_SHUTDOWN_TIMEOUT: '250' }).timeouts.shutdownTimeoutMs).toBe(250);
    expect(() => loadConfig({ BATON_SCHEDULE_TO_START_TIMEOUT: 'soon' })).toThrow(/BATON_SCHEDULE_TO_START_TIMEOUT: Invalid duration "soon"/);
    expect(() => loadConfig({ BATON_HEARTBEAT_INTERVAL: '0s' })).toThrow(/BATON_HEARTBEAT_INTERVAL: Invalid duration/);
    expect(() => loadConfig({ BATON_MAX_ATTEMPTS: '0' })).toThrow(/BATON_MAX_ATTEMPTS: Invalid number of attempts/);
    expect(() => loadConfig({ BATON_HEARTBEAT_STALE_AFTER: '2.5' })).toThrow(/BATON_HEARTBEAT_STALE_AFTER/);
    expect(parseDuration('5s')).toBe(5_000);
    expect(parseDuration('5 sec')).toBeUndefined();
  });

  it('reads the API limits as sizes, counts and durations, and names a bad one', () => {
    const limits = loadConfig({
      BATON_API_MAX_VALUE_BYTES: '4KiB',
      BATON_API_MAX_RESPONSE_BYTES: '2MiB',
      BATON_API_MAX_SUBSCRIPTIONS: '200',
      BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: '20',
      BATON_API_MAX_CONNECTIONS: '5000',
      BATON_API_HEADERS_TIMEOUT: '5s',
      BATON_API_REQUEST_TIMEOUT: '1m',
      BATON_API_KEEP_ALIVE_TIMEOUT: '2s',
      BATON_API_MAX_BODY_BYTES: '256KiB',
      BATON_API_MAX_SUBMIT_BATCH: '200',
    }).apiLimits;
    expect(limits).toEqual({
      maxValueBytes: 4096,
      maxResponseBytes: 2 * 1024 ** 2,
      maxSubscriptions: 200,
      maxSubscriptionsPerClient: 20,
      maxConnections: 5000,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 2_000,
      maxBodyBytes: 256 * 1024,
      maxSubmitBatch: 200,
    });
    expect(DEFAULT_API_LIMITS).toMatchObject({ maxBodyBytes: 1024 ** 2, maxSubmitBatch: 1_000 });
    expect(() => loadConfig({ BATON_API_MAX_SUBMIT_BATCH: '0' })).toThrow(/BATON_API_MAX_SUBMIT_BATCH: Invalid number of submissions/);
    expect(parseByteSize('16384')).toBe(16384);
    expect(parseByteSize('1 GiB')).toBe(1024 ** 3);
    expect(parseByteSize('16KB')).toBeUndefined(); // binary units only: KiB, MiB, GiB
    expect(() => loadConfig({ BATON_API_MAX_VALUE_BYTES: 'lots' })).toThrow(/BATON_API_MAX_VALUE_BYTES: Invalid size "lots"/);
    expect(() => loadConfig({ BATON_API_MAX_RESPONSE_BYTES: '2GiB' })).toThrow(/BATON_API_MAX_RESPONSE_BYTES: Invalid size/);
    expect(() => loadConfig({ BATON_API_MAX_SUBSCRIPTIONS: '0' })).toThrow(/BATON_API_MAX_SUBSCRIPTIONS: Invalid number of subscriptions/);
    expect(() => loadConfig({ BATON_API_MAX_CONNECTIONS: '-1' })).toThrow(/BATON_API_MAX_CONNECTIONS: Invalid number of connections/);
    expect(() => loadConfig({ BATON_API_HEADERS_TIMEOUT: 'never' })).toThrow(/BATON_API_HEADERS_TIMEOUT: Invalid duration/);
    expect(() => loadConfig({ BATON_API_MAX_VALUE_BYTES: '1MiB', BATON_API_MAX_RESPONSE_BYTES: '512KiB' })).toThrow(
      /BATON_API_MAX_VALUE_BYTES: must not be larger than BATON_API_MAX_RESPONSE_BYTES/,
    );
    expect(() => loadConfig({ BATON_API_MAX_SUBSCRIPTIONS: '10', BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: '11' })).toThrow(/BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT: must not be larger/);
    expect(() => loadConfig({ BATON_API_HEADERS_TIMEOUT: '40s' })).toThrow(/BATON_API_HEADERS_TIMEOUT: must not be longer than BATON_API_REQUEST_TIMEOUT/);
  });

  it('reads BATON_API_INTROSPECTION as on or off', () => {
    for (const on of ['on', 'ON', '1', 'true']) expect(loadConfig({ BATON_API_INTROSPECTION: on }).apiIntrospection, on).toBe(true);
    for (const off of ['off', '0', 'false']) expect(loadConfig({ BATON_API_INTROSPECTION: off }).apiIntrospection, off).toBe(false);
    expect(() => loadConfig({ BATON_API_INTROSPECTION: 'maybe' })).toThrow(/BATON_API_INTROSPECTION: Invalid switch: expected on or off/);
  });

  it('reads BATON_HTTP_ALLOW as hosts, addresses and CIDR ranges, naming a bad entry', () => {
    expect(loadConfig({ BATON_HTTP_ALLOW: 'api.internal, 10.0.0.0/8 127.0.0.1,fd00::/8  Hooks.Corp.' }).httpAllow).toEqual([
      'api.internal',
      '10.0.0.0/8',
      '127.0.0.1',
      'fd00::/8',
      'hooks.corp.',
    ]);
    expect(() => loadConfig({ BATON_HTTP_ALLOW: '10.0.0.0/33' })).toThrow(/BATON_HTTP_ALLOW: Invalid allow-list entry "10.0.0.0\/33": the prefix length must be from 0 to 32/);
    expect(() => loadConfig({ BATON_HTTP_ALLOW: 'intranet/8' })).toThrow(/BATON_HTTP_ALLOW: Invalid allow-list entry "intranet\/8": a CIDR range needs an IP address/);
    expect(() => loadConfig({ BATON_HTTP_ALLOW: 'http://x.test' })).toThrow(/BATON_HTTP_ALLOW: Invalid allow-list entry "http:\/\/x.test" is not a host/);
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

  it('refuses a BATON_DB_SCHEMA whose tables another installation, a scratch schema or Postgres would share', () => {
    for (const [name, message] of [
      ['public', /"public" is where the default installation keeps its tables/],
      ['baton', /"baton" would keep its read model in baton_read, the default installation's/],
      ['baton_read', /"baton_read" is the default installation's read model/],
      ['t1_read', /"t1_read" ends in _read.*installation t1's read model/],
      ['baton_verify_deadbeef', /"baton_verify_deadbeef" has the form of a scratch schema/],
      ['baton_rebuild_executions', /scratch schema/],
      ['t1_rebuild_workers', /scratch schema/],
      ['pg_catalog', /"pg_catalog" is reserved by Postgres/],
      ['information_schema', /reserved by Postgres/],
    ] as const) {
      expect(() => loadConfig({ BATON_DB_SCHEMA: name }), name).toThrow(new RegExp(`BATON_DB_SCHEMA: .*${message.source}`));
    }
    expect(loadConfig({ BATON_DB_SCHEMA: 'baton_tenant' }).dbSchema).toBe('baton_tenant');
  });

  it('reads the namespace settings, naming a bad one', () => {
    const c = loadConfig({ BATON_NAMESPACE: 'team-a', BATON_DB_SCHEMA: 'tenant1', BATON_NAMESPACE_CONCURRENCY: 'team-a=5, team-b=20' }, '/srv/app');
    expect([c.namespace, c.dbSchema, c.namespaceConcurrency]).toEqual(['team-a', 'tenant1', { 'team-a': 5, 'team-b': 20 }]);
    expect(() => loadConfig({ BATON_NAMESPACE: 'Team A' })).toThrow(/BATON_NAMESPACE: must be 1 to 63 lower-case/);
    expect(() => loadConfig({ BATON_DB_SCHEMA: 'Tenant-1' })).toThrow(/BATON_DB_SCHEMA: must be 1 to 30/);
    expect(() => loadConfig({ BATON_NAMESPACE_CONCURRENCY: 'team-a=0' })).toThrow(/BATON_NAMESPACE_CONCURRENCY: team-a: the limit must be from 1/);
    expect(() => loadConfig({ BATON_NAMESPACE_CONCURRENCY: 'team-a' })).toThrow(/BATON_NAMESPACE_CONCURRENCY: "team-a" must be <namespace>=<limit>/);
    expect(() => loadConfig({ BATON_NAMESPACE_CONCURRENCY: 'team-a=5,team-a=7' })).toThrow(/BATON_NAMESPACE_CONCURRENCY: team-a is given twice: one limit per namespace/);
  });
});
