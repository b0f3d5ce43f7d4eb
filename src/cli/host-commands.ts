// The long-running commands: `baton executor`, `baton worker`, `baton projector`, `baton api`
// (and `baton dev`, in dev.ts). Each starts the same way: bind its ports first, so a port it
// cannot have stops it before it has announced anything (a worker in the liveness table, a
// WorkerStarted); then open its database (waiting for it), start its hosts, and run until a
// stop signal (shutdown.ts). A failed start stops whatever had started and exits 1 in one line.
import { createActionRegistry } from '../actions/index.ts';
import { startHealthServer } from '../observability/http.ts';
import { refuseIfTaken } from '../observability/listen.ts';
import { startProjector } from '../readmodel/projector-host.ts';
import {
  apiPortAsked,
  apiPortChecked,
  defaultWorkerId,
  hostBase,
  loadActions,
  openHostEnvironment,
  startApi,
  startExecutorHost,
  startWorker,
  type HostBase,
  type HostEnvironment,
  type RunningHosts,
  type TransportKind,
} from './hosts.ts';
import { guardProcess } from './process-guard.ts';
import { runUntilSignalled, stopHosts, watchStopSignals, type StopSignals } from './shutdown.ts';

export interface MetricsOptions {
  metricsHost: string;
  metricsPort: number;
  /** `--metrics-port` when the user gave it (a taken port is then refused); unset for the default (a taken one is swapped). */
  metricsPortSetting?: string;
}


interface HostRun extends MetricsOptions {
  transport?: TransportKind;
  poolSize?: number;
  shutdownTimeoutMs?: number;
}

/** What a host's start function hands back: its health, and what to say once it runs. */
interface Started {
  problems?: () => string[];
  announce(env: HostEnvironment, hosts: RunningHosts): void;
}

/**
 * Bind the metrics port, open the environment, run `start` (which records each host it starts
 * in `hosts`, so a failure stops exactly those), then run until signalled.
 */
export async function runHost(
  base: HostBase,
  component: string,
  o: HostRun,
  start: (env: HostEnvironment, hosts: RunningHosts) => Promise<Started>,
): Promise<void> {
  const stop = watchStopSignals(base.log);
  try {
    await startAndRun(base, component, o, stop, start);
  } catch (err) {
    if (!stop.signal.aborted) throw err;
    // Told to stop while starting (waiting for its database, say): that is not a failure.
    base.log.info({ signal: stop.signal.reason, err }, `${component} stopped before it had started`);
  } finally {
    stop.dispose();
  }
}

async function startAndRun(
  base: HostBase,
  component: string,
  o: HostRun,
  stop: StopSignals,
  start: (env: HostEnvironment, hosts: RunningHosts) => Promise<Started>,
): Promise<void> {
  let problems: () => string[] = () => ['starting'];
  const health = await startHealthServer({
    host: o.metricsHost,
    port: o.metricsPort,
    portSetting: o.metricsPortSetting,
    registry: base.registry,
    problems: () => problems(),
    log: base.log,
  });
  let env: HostEnvironment;
  try {
    env = await openHostEnvironment({ base, component, transport: o.transport, poolSize: o.poolSize, signal: stop.signal });
  } catch (err) {
    await health.close();
    throw err;
  }
  const hosts: RunningHosts = { workers: [], health };
  let started: Started;
  try {
    started = await start(env, hosts);
  } catch (err) {
    await stopHosts(env, hosts, `${component} failed to start`);
    throw err;
  }
  const own = started.problems ?? (() => []);
  problems = () => [...env.unreachable(), ...own()];
  const guard = guardProcess({ log: env.log, workers: () => hosts.workers, liveness: env.liveness, stopping: () => stop.signal.aborted });
  if (!stop.signal.aborted) started.announce(env, hosts);
  // A signal that came while starting is drained at once.
  try {
    await runUntilSignalled(env, hosts, stop, { shutdownTimeoutMs: o.shutdownTimeoutMs });
  } finally {
    guard.dispose();
  }
}

export function runExecutor(o: MetricsOptions & { transport?: TransportKind }): Promise<void> {
  return runHost(hostBase('executor'), 'executor', o, async (env, hosts) => {
    const executor = (hosts.executor = startExecutorHost(env));
    await executor.ready;
    return { announce: () => env.log.info({ metrics: `${hosts.health.url}/metrics`, transport: env.transportKind }, 'executor running') };
  });
}

export async function runWorker(
  o: MetricsOptions & { id?: string; actions?: string; capacity: number; transport?: TransportKind; shutdownTimeout?: number; namespaces?: string[] },
): Promise<void> {
  const base = hostBase('worker');
  // Before the database: a module that does not load is refused before anything is started.
  const actions = createActionRegistry(await loadActions(o.actions, base.config));
  return runHost(base, 'worker', { ...o, shutdownTimeoutMs: o.shutdownTimeout }, async (env, hosts) => {
    const worker = await startWorker(env, { workerId: o.id ?? defaultWorkerId(), actions, capacity: o.capacity, shutdownTimeoutMs: o.shutdownTimeout, ...(o.namespaces && { namespaces: o.namespaces }) });
    hosts.workers.push(worker);
    return { problems: () => worker.problems(), announce: () => env.log.info({ metrics: `${hosts.health.url}/metrics`, transport: env.transportKind }, 'worker running') };
  });
}

export function runProjector(o: MetricsOptions): Promise<void> {
  return runHost(hostBase('projector'), 'projector', { ...o, transport: 'postgres' }, async (env, hosts) => {
    const projector = (hosts.projector = startProjector({ pool: env.db.pool, store: env.store, log: env.log, registry: env.registry }));
    return {
      problems: () => projector.problems(),
      announce: () => env.log.info({ metrics: `${hosts.health.url}/metrics` }, 'projector running'),
    };
  });
}

/** `port`: from `--port` (refused when taken); unset: BATON_API_PORT, else the default. */
export async function runApi(o: MetricsOptions & { port?: number; actions?: string }): Promise<void> {
  const base = hostBase('api');
  await refuseIfTaken(apiPortChecked(apiPortAsked(base.config, o.port, '--port'), o));
  const actions = createActionRegistry(await loadActions(o.actions, base.config));
  // Its transport serves deadLetters.
  return runHost(base, 'api', o, async (env, hosts) => {
    const api = (hosts.api = await startApi(env, actions, o.port, '--port'));
    return { announce: () => env.log.info({ graphql: api.url, metrics: `${hosts.health.url}/metrics` }, 'API running') };
  });
}
