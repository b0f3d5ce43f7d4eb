// What `baton dev | executor | worker | projector | api` do (their options are defined in
// main.ts): open the environment, start the host, serve /healthz and /metrics, run until signalled.
import { createActionRegistry } from '../../actions/index.ts';
import { startHealthServer } from '../../observability/http.ts';
import { startProjector } from '../../readmodel/projector-host.ts';
import { defaultWorkerId, describeDev, loadActions, openHostEnvironment, runUntilSignalled, startApi, startDev, startExecutorHost, startWorker } from '../hosts.ts';

export async function devCommand(o: { workers: number; capacity: number; transport: 'nats' | 'postgres'; actions?: string; metricsPort: number; metricsHost: string; shutdownTimeout?: number; port?: number }): Promise<void> {
  const options = { ...o, shutdownTimeoutMs: o.shutdownTimeout, apiPort: o.port };
  const { env, hosts } = await startDev(options);
  console.log(describeDev(env, hosts, options));
  await runUntilSignalled(env, hosts);
}

export async function executorCommand(o: { transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string }): Promise<void> {
  const env = await openHostEnvironment({ transport: o.transport, component: 'executor' });
  const executor = startExecutorHost(env);
  await executor.ready;
  const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
  env.log.info({ metrics: `${health.url}/metrics`, transport: env.transportKind }, 'executor running');
  await runUntilSignalled(env, { executor, workers: [], health });
}

export async function workerCommand(o: { id?: string; actions?: string; capacity: number; transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string; shutdownTimeout?: number }): Promise<void> {
  const env = await openHostEnvironment({ transport: o.transport, component: 'worker' });
  const worker = await startWorker(env, {
    workerId: o.id ?? defaultWorkerId(),
    actions: createActionRegistry(await loadActions(o.actions)),
    capacity: o.capacity,
    shutdownTimeoutMs: o.shutdownTimeout,
  });
  const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
  env.log.info({ metrics: `${health.url}/metrics`, transport: env.transportKind }, 'worker running');
  await runUntilSignalled(env, { workers: [worker], health });
}

export async function projectorCommand(o: { metricsPort: number; metricsHost: string }): Promise<void> {
  const env = await openHostEnvironment({ transport: 'postgres', component: 'projector' });
  const projector = startProjector({ pool: env.db.pool, store: env.store, log: env.log, registry: env.registry });
  const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => projector.problems(), log: env.log });
  env.log.info({ metrics: `${health.url}/metrics` }, 'projector running');
  await runUntilSignalled(env, { projector, workers: [], health });
}

export async function apiCommand(o: { port?: number; actions?: string; metricsPort: number; metricsHost: string }): Promise<void> {
  const env = await openHostEnvironment({ component: 'api' }); // its transport serves deadLetters
  const api = await startApi(env, createActionRegistry(await loadActions(o.actions)), o.port);
  const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
  env.log.info({ graphql: api.url, metrics: `${health.url}/metrics` }, 'API running');
  await runUntilSignalled(env, { workers: [], api, health });
}
