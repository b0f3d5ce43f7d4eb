// What long-running hosts started from the CLI are made of: the environment they open (config,
// logger, database, event store, transport) and the executor, worker and API hosts with the
// configured timeouts. host-commands.ts runs them; dev.ts runs all of them in one process.
import os from 'node:os';
import type { NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { configuredBuiltinActions, loadActionsModule, type AnyActionDefinition } from '../actions/index.ts';
import { dbWaitFor, loadConfig, workerStaleAfterMs, type Config } from '../config.ts';
import { BatonError, ConfigError } from '../errors.ts';
import { startExecutor, type Executor } from '../executor/executor.ts';
import { createExecutorBeats } from '../executor/partitions/executor-beats.ts';
import { startPartitionLeases } from '../executor/partitions/leases.ts';
import { followActors } from '../runtime/follow-actors.ts';
import { readStartPoint } from '../runtime/start-point.ts';
import { openEnvironment, type Environment } from './environment.ts';
import { warmUp } from '../process/warm-up.ts';
import { startOrchestrator } from '../workflow/orchestrator.ts';
import { scheduleRetention, storedEventsGauge } from '../retention/schedule.ts';
import { archivedStream } from '../retention/store-side.ts';
import { startScheduleHost } from '../schedule/schedule-host.ts';
import { createLivenessStore, type LivenessStore } from '../liveness/liveness-store.ts';
import { componentLogger, createLogger } from '../log.ts';
import type { HealthServer } from '../observability/http.ts';
import { connectNats, createNatsWorkTransport } from '../transport/nats/index.ts';
import { watchReachability } from '../process/reachability.ts';
import { waitForServer } from '../db/wait.ts';
import { redactUrl } from '../db/connect.ts';
import { natsNamesOf } from '../transport/nats/installation-names.ts';
import { createPostgresWorkTransport } from '../transport/postgres/index.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { LocalWorkers } from '../worker/eager-dispatch.ts';
import { startWorkerHost, type WorkerHost } from '../worker/worker-host.ts';
import type { Projector } from '../readmodel/projector-host.ts';
import type { ApiServer } from '../api/server.ts';
import type { ActionRegistry } from '../actions/registry.ts';

export type TransportKind = 'nats' | 'postgres';

/** A host's environment: the one every process has (environment.ts), plus its transport, liveness and metrics registry. */
export interface HostEnvironment extends Environment {
  liveness: LivenessStore;
  transport: WorkTransport;
  transportKind: TransportKind;
  registry: Registry;
  /** This process's worker hosts, for its executor's eager dispatch (BATON_EAGER_DISPATCH, on by default); undefined when off. */
  localWorkers: LocalWorkers | undefined;
  /** What this host cannot reach now (the database, NATS): part of every host's /healthz (src/process/reachability.ts). */
  unreachable(): string[];
  close(): Promise<void>;
}

/** What a host has before it opens its database: enough to bind its ports and log. */
export interface HostBase {
  config: Config;
  log: Logger;
  registry: Registry;
}

export function hostBase(component: string): HostBase {
  const config = loadConfig();
  const log = componentLogger(createLogger(config), component);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return { config, log, registry };
}

/** The host components that schedule or run executions, and warm up before their first (src/process/warm-up.ts). */
const RUNS_EXECUTIONS = new Set(['executor', 'worker', 'dev']);

/**
 * Open everything a host needs. The transport defaults to NATS when BATON_NATS_URL is set.
 * A database that refuses connections is waited for (BATON_DB_WAIT, default: for good).
 */
export async function openHostEnvironment(o: {
  base: HostBase;
  transport?: TransportKind;
  poolSize?: number;
  component: string;
  /** Stops waiting for the database (a stop signal while starting). */
  signal?: AbortSignal;
}): Promise<HostEnvironment> {
  const { config, log, registry } = o.base;
  const kind: TransportKind = o.transport ?? (config.natsUrl ? 'nats' : 'postgres');
  if (kind === 'nats' && !config.natsUrl) throw new ConfigError('--transport nats needs BATON_NATS_URL (e.g. nats://127.0.0.1:4222)');
  // Small pools: a host's appends are one statement each, and a database serves many hosts.
  const env = await openEnvironment({ config, log, as: 'host', poolSize: o.poolSize ?? 8, applicationName: `baton-${o.component}`, ...(o.signal && { signal: o.signal }) });
  const { db } = env;
  let nc: NatsConnection | undefined;
  let transport: WorkTransport;
  try {
    if (kind === 'nats') {
      // Waited for as the database is (BATON_DB_WAIT): a host started beside its NATS server must not exit before it is up.
      nc = await waitForServer(() => connectNats(config.natsUrl!, log), { ...dbWaitFor(config, 'host'), log, what: `NATS at ${redactUrl(config.natsUrl!)}`, ...(o.signal && { signal: o.signal }) });
      transport = await createNatsWorkTransport(nc, { log, ...(await natsNamesOf(db.pool, db.embeddedClusterDir)) });
    } else {
      transport = createPostgresWorkTransport(db.pool, { log });
    }
  } catch (err) {
    await closeAll(log, [() => nc?.close(), () => env.close()]);
    throw err;
  }
  // Only hosts that run executions: the projector's and the API's statements are others.
  if (RUNS_EXECUTIONS.has(o.component)) await warmUp(env.store, log);
  const reachability = watchReachability({ pool: db.pool, ...(nc && { nc }) });
  return {
    ...env,
    liveness: createLivenessStore(db.pool),
    transport,
    transportKind: kind,
    registry,
    localWorkers: config.eagerDispatch ? new LocalWorkers() : undefined,
    // Every step runs even when one before it failed: the last one stops an embedded Postgres
    // this process owns, which must not outlive it.
    unreachable: () => reachability.problems(),
    close: () => closeAll(log, [async () => reachability.stop(), () => transport.close(), () => nc?.drain(), () => env.close()]),
  };
}

/** Run each closer in turn whatever the others did; throws the first failure at the end. */
export async function closeAll(log: Logger, closers: (() => Promise<unknown> | undefined)[]): Promise<void> {
  let first: unknown;
  for (const close of closers) {
    try {
      await close();
    } catch (err) {
      log.warn({ err }, 'error while closing');
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}

/** The built-ins (http.request with BATON_HTTP_ALLOW, when `config` is given) and the module's actions. */
export async function loadActions(modulePath: string | undefined, config: Pick<Config, 'httpAllow'>): Promise<AnyActionDefinition[]> {
  const extra = modulePath ? await loadActionsModule(modulePath) : [];
  return [...configuredBuiltinActions(config), ...extra];
}

/** A default worker id: stable per host and process, and valid as `worker:<id>`. */
export const defaultWorkerId = () => `${os.hostname().replace(/[^A-Za-z0-9._-]/g, '-')}-${process.pid}`;

export interface RunningHosts {
  executor?: Executor;
  workers: WorkerHost[];
  projector?: Projector;
  api?: ApiServer;
  health: HealthServer;
}

/**
 * The executor with the configured timeouts (BATON_SCHEDULE_TO_START_TIMEOUT, BATON_HEARTBEAT_*),
 * and beside it the workflow orchestrator: every executor process runs one (they race safely).
 * They share the environment's runtimes and one follower that keeps them current, so each event
 * is read and folded once in this process, and an append made here (by a worker of `baton dev`,
 * say) reaches them at once.
 */
export function startExecutorHost(env: HostEnvironment, log: Logger = env.log): Executor {
  const runtimes = [env.runtime.actors, env.workerStreams, env.workflows, env.schedules];
  // From the read model's checkpoint and the actors live there (start-point.ts), not from 0; its
  // live set is read from the Postgres store's own tables, so only with that store.
  const startFrom = env.storeKind === 'postgres' ? () => readStartPoint(env.db.pool, runtimes.map((r) => r.kind.streamPrefix)) : undefined;
  const follower = followActors({ store: env.store, runtimes, log, who: 'executor', ...(startFrom && { startFrom }) });
  const t = env.config.timeouts;
  // Which concurrency buckets this executor decides: the partitions it leases (one executor: all).
  const partitions = startPartitionLeases({
    store: env.store,
    beats: createExecutorBeats(env.db.pool, env.transport.kind),
    log: componentLogger(log, 'partitions'),
    partitionCount: env.config.partitions,
    staleAfterMs: workerStaleAfterMs(t),
    beatEveryMs: t.heartbeatIntervalMs,
  });
  const executor = startExecutor({
    partitions,
    store: env.store,
    actors: { executions: env.runtime, workerStreams: env.workerStreams, follower },
    transport: env.transport,
    workers: env.liveness,
    log,
    registry: env.registry,
    scheduleToStartMs: t.scheduleToStartMs,
    staleAfterMs: workerStaleAfterMs(t),
    noWorkerTimeoutMs: t.noWorkerTimeoutMs,
    // A worker times its own runs out; the executor steps in a few heartbeats later, when it is gone.
    timeoutGraceMs: Math.max(1_000, t.heartbeatIntervalMs * 2),
    namespaceConcurrency: env.config.namespaceConcurrency,
    namespaceRateLimits: env.config.namespaceRateLimits,
    localWorkers: env.localWorkers,
  });
  const workflows = startOrchestrator({
    store: env.store,
    actors: { executions: env.runtime, workflows: env.workflows, follower },
    log: componentLogger(log, 'workflows'),
    registry: env.registry,
  });
  // The gauge of stored events, and BATON_RETENTION's runs (src/retention/schedule.ts).
  storedEventsGauge(env.db.pool, env.registry, env.storeKind === 'postgres');
  const retention = env.config.retention && scheduleRetention({ pool: env.db.pool, store: env.store, config: env.config.retention, log: componentLogger(log, 'retention'), registry: env.registry });
  // Beside them the schedule host: every executor fires due ticks (they race safely, schedule-host.ts).
  const schedules = startScheduleHost({
    store: env.store,
    actors: { schedules: env.schedules, executions: env.runtime, workflows: env.workflows, follower },
    log: componentLogger(log, 'schedules'),
    registry: env.registry,
    archived: async (streamId) => (await archivedStream(env.db.pool, streamId)) !== undefined,
  });
  return {
    ...executor,
    ready: Promise.all([executor.ready, workflows.ready, schedules.ready, partitions.ready]).then(() => undefined),
    async stop() {
      await retention?.stop();
      await follower.stop();
      await schedules.stop();
      await workflows.stop();
      await executor.stop();
      await partitions.stop(); // released: another executor claims them at once
    },
  };
}

/** A worker host with the configured heartbeat, start-to-close and shutdown timeouts. */
export function startWorker(
  env: HostEnvironment,
  o: { workerId: string; actions: ActionRegistry; capacity: number; shutdownTimeoutMs?: number; namespaces?: readonly string[] },
): Promise<WorkerHost> {
  const t = env.config.timeouts;
  return startWorkerHost({
    workerId: o.workerId,
    store: env.store,
    runtime: env.runtime,
    workerStreams: env.workerStreams,
    transport: env.transport,
    liveness: env.liveness,
    actions: o.actions,
    capacity: o.capacity,
    log: env.log,
    registry: env.registry,
    heartbeatIntervalMs: t.heartbeatIntervalMs,
    staleAfterMs: workerStaleAfterMs(t),
    startToCloseMs: t.startToCloseMs,
    shutdownTimeoutMs: o.shutdownTimeoutMs ?? t.shutdownTimeoutMs,
    ...(o.namespaces !== undefined && { namespaces: o.namespaces }),
    localWorkers: env.localWorkers,
  });
}

/**
 * The GraphQL API on the configured address (BATON_API_HOST/PORT, tokens from the environment).
 * `port` and `portSetting`: a port asked for by an option (`--port`); otherwise BATON_API_PORT
 * when set, else the default, which is swapped for a free one when taken.
 * Imported here, not at the top: graphql-yoga and its plugins take ~0.4 s to load (2-core dev
 * machine), which the executor, worker and projector hosts would otherwise pay on every start.
 */
/** The GraphQL API's port as startApi will bind it, with the setting that asked for it (none: the default, swapped when taken). */
export function apiPortAsked(config: Pick<Config, 'apiHost' | 'apiPort' | 'apiPortSet'>, port: number | undefined, portSetting: string | undefined) {
  const setting = port !== undefined ? portSetting : config.apiPortSet ? 'BATON_API_PORT' : undefined;
  return { host: config.apiHost, port: port ?? config.apiPort, setting, what: 'the GraphQL API' };
}

/**
 * The API's port as asked, refused when it is the metrics server's too: the second to bind found
 * it taken "by another program" (the first), after the database had been started and migrated.
 */
export function apiPortChecked(asked: ReturnType<typeof apiPortAsked>, metrics: { metricsPort: number; metricsPortSetting?: string }): ReturnType<typeof apiPortAsked> {
  if (asked.port !== 0 && asked.port === metrics.metricsPort) {
    const api = asked.setting ?? "the GraphQL API's default port";
    throw new BatonError(`${api} and ${metrics.metricsPortSetting ?? '--metrics-port'} are both ${asked.port}: the GraphQL API and the /healthz and /metrics server need a port each`);
  }
  return asked;
}

export async function startApi(env: HostEnvironment, actions: ActionRegistry, port?: number, portSetting?: string): Promise<ApiServer> {
  const { startApiServer } = await import('../api/server.ts');
  const asked = apiPortAsked(env.config, port, portSetting);
  return startApiServer({
    pool: env.db.pool,
    runtime: env.runtime,
    store: env.store,
    actions,
    log: env.log,
    host: asked.host,
    port: asked.port,
    portSetting: asked.setting,
    transport: env.transport,
    staleAfterMs: workerStaleAfterMs(env.config.timeouts),
    namespaceRateLimits: env.config.namespaceRateLimits,
    adminToken: env.config.apiToken,
    readToken: env.config.apiReadToken,
    ...(env.config.apiNamespaceTokens !== undefined && { namespaceTokens: env.config.apiNamespaceTokens }),
    limits: env.config.apiLimits,
    introspection: env.config.apiIntrospection,
  });
}
