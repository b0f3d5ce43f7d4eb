// Long-running hosts started from the CLI: `baton executor`, `baton worker`, and `baton dev`
// (all of them in one process on the embedded default). Each exposes /healthz and /metrics
// and drains on SIGTERM/SIGINT, then exits 0.
import os from 'node:os';
import type { NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { builtinActions, createActionRegistry, loadActionsModule, type AnyActionDefinition } from '../actions/index.ts';
import { loadConfig, workerStaleAfterMs, type Config } from '../config.ts';
import { openDatabase, redactUrl, type Database } from '../db/connect.ts';
import { ConfigError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { openEventStore, type EventStoreKind } from './event-store.ts';
import { startExecutor, type Executor } from '../executor/executor.ts';
import { startOrchestrator } from '../workflow/orchestrator.ts';
import { createLivenessStore, type LivenessStore } from '../liveness/liveness-store.ts';
import { createLogger } from '../log.ts';
import { startHealthServer, type HealthServer } from '../observability/http.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport } from '../transport/nats.ts';
import { createPostgresWorkTransport } from '../transport/postgres.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../worker/worker-host.ts';
import { startProjector, type Projector } from '../readmodel/projector-host.ts';
import type { ApiServer } from '../api/server.ts';
import type { ActionRegistry } from '../actions/registry.ts';

export type TransportKind = 'nats' | 'postgres';

export interface HostEnvironment {
  config: Config;
  log: Logger;
  db: Database;
  store: EventStore;
  /** Which adapter `store` is (BATON_EVENTSTORE_URL set: eventstoredb). */
  storeKind: EventStoreKind;
  runtime: ExecutionRuntime;
  liveness: LivenessStore;
  transport: WorkTransport;
  transportKind: TransportKind;
  registry: Registry;
  close(): Promise<void>;
}

/** Open everything a host needs. The transport defaults to NATS when BATON_NATS_URL is set. */
export async function openHostEnvironment(o: { transport?: TransportKind; component: string; poolSize?: number }): Promise<HostEnvironment> {
  const config = loadConfig();
  const log = createLogger(config).child({ component: o.component });
  const kind: TransportKind = o.transport ?? (config.natsUrl ? 'nats' : 'postgres');
  if (kind === 'nats' && !config.natsUrl) throw new ConfigError('--transport nats needs BATON_NATS_URL (e.g. nats://127.0.0.1:4222)');
  // Small pools: a host's appends are one statement each, and a database serves many hosts.
  const db = await openDatabase(config, log, { max: o.poolSize ?? 8, applicationName: `baton-${o.component}` });
  const { store, kind: storeKind } = await openEventStore(config, db.pool, log);
  let nc: NatsConnection | undefined;
  let transport: WorkTransport;
  if (kind === 'nats') {
    nc = await connectNats(config.natsUrl!, log);
    transport = await createNatsWorkTransport(nc, { log });
  } else {
    transport = createPostgresWorkTransport(db.pool, { log });
  }
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    config,
    log,
    db,
    store,
    storeKind,
    runtime: createExecutionRuntime(store, { defaultMaxAttempts: config.timeouts.maxAttempts }),
    liveness: createLivenessStore(db.pool),
    transport,
    transportKind: kind,
    registry,
    async close() {
      await transport.close();
      await nc?.drain();
      await store.close();
      await db.close();
    },
  };
}

export async function loadActions(modulePath?: string): Promise<AnyActionDefinition[]> {
  const extra = modulePath ? await loadActionsModule(modulePath) : [];
  return [...builtinActions, ...extra];
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

/** Run until SIGTERM/SIGINT, then drain in order: API, workers, executor, projector, connections. */
export async function runUntilSignalled(env: HostEnvironment, hosts: RunningHosts): Promise<void> {
  await new Promise<void>((resolve) => {
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) {
        env.log.warn({ signal }, 'second signal: exiting without finishing the drain');
        process.exit(1);
      }
      signalled = true;
      env.log.info({ signal }, 'draining');
      void (async () => {
        try {
          await hosts.api?.close();
          await Promise.all(hosts.workers.map((w) => w.stop(`received ${signal}`)));
          await hosts.executor?.stop();
          await hosts.projector?.stop();
          await hosts.health.close();
          await env.close();
        } catch (err) {
          env.log.error({ err }, 'error while draining');
          process.exitCode = 1;
        }
        resolve();
      })();
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}

export interface DevOptions {
  workers: number;
  /** GraphQL API port (BATON_API_PORT, default 4000); 0 picks a free one. */
  apiPort?: number;
  capacity: number;
  metricsPort: number;
  metricsHost?: string;
  transport?: TransportKind;
  actions?: string;
  /** Default: BATON_SHUTDOWN_TIMEOUT. */
  shutdownTimeoutMs?: number;
}

export async function startDev(o: DevOptions): Promise<{ env: HostEnvironment; hosts: RunningHosts }> {
  // One process runs every role here, so it gets the connections of several hosts.
  const env = await openHostEnvironment({ transport: o.transport ?? 'postgres', component: 'dev', poolSize: 20 });
  const hosts: Partial<RunningHosts> & { workers: WorkerHost[] } = { workers: [] };
  try {
    const actions = createActionRegistry(await loadActions(o.actions));
    hosts.executor = startExecutorHost(env, env.log.child({ component: 'executor' }));
    await hosts.executor.ready;
    const projector = (hosts.projector = startProjector({ pool: env.db.pool, store: env.store, log: env.log.child({ component: 'projector' }), registry: env.registry }));
    hosts.workers = await Promise.all(
      Array.from({ length: o.workers }, (_, i) =>
        startWorker(env, { workerId: `dev-${i + 1}`, actions, capacity: o.capacity, shutdownTimeoutMs: o.shutdownTimeoutMs }),
      ),
    );
    hosts.api = await startApi(env, actions, o.apiPort);
    hosts.health = await startHealthServer({
      host: o.metricsHost,
      port: o.metricsPort,
      registry: env.registry,
      problems: () => projector.problems(),
      log: env.log,
    });
    return { env, hosts: hosts as RunningHosts };
  } catch (err) {
    // Stop whatever started, so a failed start (a port in use, say) leaves nothing running.
    await hosts.api?.close().catch(() => undefined);
    await Promise.all(hosts.workers.map((w) => w.stop('dev failed to start').catch(() => undefined)));
    await hosts.executor?.stop().catch(() => undefined);
    await hosts.projector?.stop().catch(() => undefined);
    await env.close();
    throw err;
  }
}

/**
 * The executor with the configured timeouts (BATON_SCHEDULE_TO_START_TIMEOUT, BATON_HEARTBEAT_*),
 * and beside it the workflow orchestrator: every executor process runs one (they race safely).
 */
export function startExecutorHost(env: HostEnvironment, log: Logger = env.log): Executor {
  const executor = startSchedulingExecutor(env, log);
  const workflows = startOrchestrator({ store: env.store, runtime: env.runtime, log: log.child({ component: 'workflows' }), registry: env.registry });
  return {
    ...executor,
    ready: Promise.all([executor.ready, workflows.ready]).then(() => undefined),
    async stop() {
      await workflows.stop();
      await executor.stop();
    },
  };
}

function startSchedulingExecutor(env: HostEnvironment, log: Logger): Executor {
  const t = env.config.timeouts;
  return startExecutor({
    store: env.store,
    runtime: env.runtime,
    transport: env.transport,
    workers: env.liveness,
    log,
    registry: env.registry,
    scheduleToStartMs: t.scheduleToStartMs,
    staleAfterMs: workerStaleAfterMs(t),
    // A worker times its own runs out; the executor steps in a few heartbeats later, when it is gone.
    timeoutGraceMs: Math.max(1_000, t.heartbeatIntervalMs * 2),
    retryBackoff: { initialMs: 1_000, multiplier: 2, maxMs: 60_000 },
  });
}

/** A worker host with the configured heartbeat, start-to-close and shutdown timeouts. */
export function startWorker(
  env: HostEnvironment,
  o: { workerId: string; actions: ActionRegistry; capacity: number; shutdownTimeoutMs?: number },
): Promise<WorkerHost> {
  const t = env.config.timeouts;
  return startWorkerHost({
    workerId: o.workerId,
    store: env.store,
    runtime: env.runtime,
    transport: env.transport,
    liveness: env.liveness,
    actions: o.actions,
    capacity: o.capacity,
    log: env.log,
    registry: env.registry,
    heartbeatIntervalMs: t.heartbeatIntervalMs,
    startToCloseMs: t.startToCloseMs,
    shutdownTimeoutMs: o.shutdownTimeoutMs ?? t.shutdownTimeoutMs,
  });
}

/**
 * The GraphQL API on the configured address (BATON_API_HOST/PORT, tokens from the environment).
 * Imported here, not at the top: graphql-yoga and its plugins take ~0.4 s to load (2-core dev
 * machine), which the executor, worker and projector hosts would otherwise pay on every start.
 */
export async function startApi(env: HostEnvironment, actions: ActionRegistry, port?: number): Promise<ApiServer> {
  const { startApiServer } = await import('../api/server.ts');
  return startApiServer({
    pool: env.db.pool,
    runtime: env.runtime,
    store: env.store,
    actions,
    log: env.log,
    host: env.config.apiHost,
    port: port ?? env.config.apiPort,
    transport: env.transport,
    staleAfterMs: workerStaleAfterMs(env.config.timeouts),
    adminToken: env.config.apiToken,
    readToken: env.config.apiReadToken,
  });
}

export function describeDev(env: HostEnvironment, hosts: RunningHosts, o: DevOptions): string {
  return [
    `Baton dev is running (${env.db.embedded ? 'embedded Postgres' : 'Postgres'}, ${env.transportKind === 'nats' ? 'NATS JetStream' : 'Postgres work queue'})`,
    `  database  ${redactUrl(env.db.url)}${env.db.embedded ? ` (data in ${env.config.dataDir})` : ''}`,
    ...(env.storeKind === 'eventstoredb' ? [`  events    ${redactUrl(env.config.eventStoreUrl!)} (EventStoreDB/KurrentDB; the read model stays in Postgres)`] : []),
    `  workers   ${hosts.workers.map((w) => w.workerId).join(', ')} (capacity ${o.capacity} each)`,
    `  GraphQL   ${hosts.api?.url ?? '(off)'}   (GraphiQL: open it in a browser)`,
    `  timeline  ${hosts.api?.uiUrl ?? '(off)'}   (each execution's events, states and path on the statechart)`,
    `  metrics   ${hosts.health.url}/metrics   health ${hosts.health.url}/healthz`,
    `Try, from another terminal:  npx baton submit core.sleep --input '{"ms":50}' --wait`,
    `Then:  npx baton replay --all   ·   npx baton inspect <id> --at 2`,
    'Ctrl-C drains and stops.',
  ].join('\n');
}
