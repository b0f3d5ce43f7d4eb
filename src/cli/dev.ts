// `baton dev`: every role in one process on the embedded default — the GraphQL API, the
// executor, the projector and a few workers — for trying Baton on one machine.
//
// One per data dir: a second `baton dev` in the same project (the same directory, or a
// subdirectory, which finds the project's `.baton` above it) is refused before it binds a port or
// touches the database (the first keeps running, unharmed); another project, with its own data
// dir, gets its own embedded Postgres and free ports. Its workers are `dev-1`,
// `dev-2`, …, skipping ids a live process holds on a shared database (BATON_DATABASE_URL).
import path from 'node:path';
import { createActionRegistry } from '../actions/index.ts';
import { redactUrl } from '../db/connect.ts';
import { BatonError } from '../errors.ts';
import { makeDirectory } from '../fs/make-directory.ts';
import { claimPidFile } from '../process/pid-file.ts';
import { startProjector } from '../readmodel/projector-host.ts';
import { createLivenessStore } from '../liveness/liveness-store.ts';
import { holderIsGone } from '../liveness/holder-is-gone.ts';
import { WorkerIdInUseError, type WorkerHost } from '../worker/worker-host.ts';
import type { ActionRegistry } from '../actions/registry.ts';
import { runHost, type MetricsOptions } from './host-commands.ts';
import { refuseIfTaken } from '../observability/listen.ts';
import { apiPortAsked, apiPortChecked, hostBase, loadActions, startApi, startExecutorHost, startWorker, type HostBase, type HostEnvironment, type RunningHosts, type TransportKind } from './hosts.ts';
import { componentLogger } from '../log.ts';

/** Another `baton dev` runs on this data dir. */
export class DevAlreadyRunningError extends BatonError {}

export interface DevOptions extends MetricsOptions {
  workers: number;
  /** GraphQL API port; unset: BATON_API_PORT, else 4000 (swapped for a free one when taken). 0 picks a free one. */
  apiPort?: number;
  /** `--port` when the user gave it: a taken port is then refused. */
  apiPortSetting?: string;
  capacity: number;
  transport?: TransportKind;
  actions?: string;
  /** Default: BATON_SHUTDOWN_TIMEOUT. */
  shutdownTimeoutMs?: number;
}

// How many taken `dev-<n>` ids to skip before giving up: far more than processes share a database.
const MAX_ID_TRIES = 100;

export async function runDev(o: DevOptions): Promise<void> {
  const base = hostBase('dev');
  await refuseIfTaken(apiPortChecked(apiPortAsked(base.config, o.apiPort, o.apiPortSetting), o));
  // Before the data dir and the database: a module that does not load is refused before anything is started.
  const actions = createActionRegistry(await loadActions(o.actions, base.config));
  const release = await claimDataDir(base.config);
  // process.exit() (a second Ctrl-C, a drain given up) skips `finally`; 'exit' handlers still run.
  process.on('exit', release);
  try {
    // One process runs every role here, so it gets the connections of several hosts.
    await runHost(base, 'dev', { ...o, transport: o.transport ?? 'postgres', poolSize: 20 }, async (env, hosts) => {
      // The API first: its port is the last one to bind, and nothing is announced before it.
      hosts.api = await startApi(env, actions, o.apiPort, o.apiPortSetting);
      await expireGoneWorkers(env);
      hosts.executor = startExecutorHost(env, componentLogger(env.log, 'executor'));
      await hosts.executor.ready;
      const projector = (hosts.projector = startProjector({ pool: env.db.pool, store: env.store, log: componentLogger(env.log, 'projector'), registry: env.registry }));
      await startDevWorkers(env, hosts.workers, actions, o);
      return {
        problems: () => [...hosts.workers.flatMap((w) => w.problems()), ...projector.problems()],
        announce: (_env, running) => console.log(describeDev(env, running, o)),
      };
    });
  } finally {
    process.off('exit', release);
    release();
  }
}

/**
 * On the embedded Postgres, the data dir is this process's alone: a second `baton dev` there is
 * refused. With BATON_DATABASE_URL nothing of the data dir is used, and several may share it.
 * Returns what lets go of it.
 */
async function claimDataDir(config: HostBase['config']): Promise<() => void> {
  if (config.databaseUrl !== undefined) return () => undefined;
  const dataDir = config.dataDir;
  await makeDirectory(dataDir).catch((err: unknown) => {
    throw new BatonError(`BATON_DATA_DIR: cannot create ${dataDir}: ${(err as Error).message}`, { cause: err });
  });
  const lock = await claimPidFile(path.join(dataDir, 'dev.pid'));
  if (!lock.claimed) {
    throw new DevAlreadyRunningError(
      `baton dev is already running in ${dataDir} (pid ${lock.holder?.pid ?? '?, still starting'}): ` +
        'use that one (Ctrl-C in its terminal stops it), or set BATON_DATA_DIR to another directory to run a second one',
    );
  }
  return () => lock.held.releaseSync();
}

/**
 * After a kill -9, the previous process's dev-<n> rows still look live for a staleness period: an
 * executor started now handed work submitted meanwhile to those dead workers, reclaimed it once the
 * new dev-<n> announced itself, and so spent an attempt that never ran (with --max-attempts 1, the
 * execution ended Abandoned). A row whose process ran on this host and is gone is made stale first.
 */
async function expireGoneWorkers(env: HostEnvironment): Promise<void> {
  const liveness = createLivenessStore(env.db.pool);
  for (const w of await liveness.list()) {
    if (!holderIsGone(w)) continue;
    await liveness.expire(w.workerId);
    env.log.info({ workerId: w.workerId, pid: w.pid }, `worker ${w.workerId}'s process (pid ${w.pid}) is gone: its row is stale now, and what it held is reclaimed`);
  }
}

/** `dev-1` … `dev-<n>`, skipping ids a live process holds; each started worker is pushed to `into` at once. */
async function startDevWorkers(env: HostEnvironment, into: WorkerHost[], actions: ActionRegistry, o: DevOptions): Promise<void> {
  for (let n = 1; into.length < o.workers; n++) {
    if (n > o.workers + MAX_ID_TRIES) throw new BatonError(`no free dev-<n> worker id among dev-1 … dev-${n - 1}: live processes hold them all`);
    try {
      into.push(await startWorker(env, { workerId: `dev-${n}`, actions, capacity: o.capacity, shutdownTimeoutMs: o.shutdownTimeoutMs }));
    } catch (err) {
      if (!(err instanceof WorkerIdInUseError)) throw err;
      env.log.info({ workerId: err.workerId, holder: { pid: err.holder.pid, host: err.holder.host } }, `worker id ${err.workerId} is held by another live process; trying the next`);
    }
  }
}

/** What the banner says of where the data dir came from: a project's found above the working directory is named as such. */
const DATA_DIR_FROM: Record<HostBase['config']['dataDirFrom'], string> = {
  BATON_DATA_DIR: ' (BATON_DATA_DIR)',
  cwd: '',
  above: ' (the project\'s, found above the working directory; BATON_DATA_DIR sets another)',
};

export function describeDev(env: HostEnvironment, hosts: RunningHosts, o: Pick<DevOptions, 'capacity'>): string {
  return [
    `Baton dev is running (${env.db.embedded ? 'embedded Postgres' : 'Postgres'}, ${env.transportKind === 'nats' ? 'NATS JetStream' : 'Postgres work queue'})`,
    `  database  ${redactUrl(env.db.url)}${env.db.embeddedClusterDir ? ` (data in ${env.db.embeddedClusterDir})` : ''}`,
    ...(env.db.embedded ? [`  data dir  ${env.config.dataDir}${DATA_DIR_FROM[env.config.dataDirFrom]}`] : []),
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
