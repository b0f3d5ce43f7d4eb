// Baton's hosts inside your own process: a worker running your actions, and optionally the
// executor (with the workflow orchestrator) and the projector beside it, composed exactly as
// `baton worker`, `baton executor` and `baton projector` compose them (src/cli/hosts.ts).
// You decide when it drains: call `stop()` from your own signal handler, or pass an AbortSignal.
//
//   const worker = await startWorker({ databaseUrl, actions: [charge], executor: true });
//   process.once('SIGTERM', () => void worker.stop('SIGTERM'));
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { isActionDefinition, type AnyActionDefinition } from '../actions/action.ts';
import { unknownNameMessage } from '../input/nearest.ts';
import { configuredBuiltinActions } from '../actions/builtin.ts';
import { createActionRegistry } from '../actions/registry.ts';
import { defaultWorkerId, openHostEnvironment, startExecutorHost, startWorker as startWorkerHost, type HostEnvironment, type RunningHosts } from '../cli/hosts.ts';
import { stopHosts } from '../cli/shutdown.ts';
import { configWithOptions } from '../client/options-config.ts';
import { MAX_DURATION_MS } from '../config-values.ts';
import { InvalidInputError } from '../input/errors.ts';
import { componentLogger, createLogger } from '../log.ts';
import { startHealthServer } from '../observability/http.ts';
import { startProjector } from '../readmodel/projector-host.ts';
import { WorkerId } from '../../schemas/events.ts';

// What starting one can throw besides InvalidInputError (an option named): an action name given
// twice, a metricsPort that is taken, a database that cannot be reached, an id a live worker holds.
export { DuplicateActionError } from '../actions/registry.ts';
export { DatabaseUnavailableError } from '../db/database-unavailable.ts';
export { DatabaseNotMigratedError } from '../db/database-not-migrated.ts';
export { PortUnavailableError } from '../observability/listen.ts';
export { WorkerIdInUseError } from '../worker/worker-id-in-use.ts';

/** What `startWorker` takes. */
export interface EmbeddedWorkerOptions {
  /** `postgres://user:password@host:5432/database`: the database every Baton host of the installation uses. */
  databaseUrl: string;
  /** The actions this worker runs (built with `defineAction`). The built-ins (`core.*`, `http.request`) are added unless `builtins` is false; with `builtins: false`, at least one. */
  actions: readonly AnyActionDefinition[];
  /** Offer the built-in actions too. Default true. */
  builtins?: boolean;
  /** The worker's id, unique among live workers: 1 to 200 letters, digits and `. _ : -`. Default: `<hostname>-<pid>` (`-2`, `-3`, … for further ones in this process). */
  id?: string;
  /** How many runs at once. Default 10. */
  capacity?: number;
  /** Take work from NATS JetStream at this URL instead of the Postgres work queue (every host of the installation must agree). Default BATON_NATS_URL when set, as for `baton worker`. */
  natsUrl?: string;
  /** Also run the executor and the workflow orchestrator in this process (an installation needs at least one; several race safely). */
  executor?: boolean;
  /** Also run the projector, which keeps the read model the GraphQL API and `baton list` read. */
  projector?: boolean;
  /** How long a drain lets runs finish before handing them back, in ms (at most 7 days). Default BATON_SHUTDOWN_TIMEOUT (30 s). */
  shutdownTimeoutMs?: number;
  /**
   * Drains and stops the worker when it aborts (the same as calling `stop()`). Already aborted:
   * startWorker refuses at once (InvalidInputError naming `options.signal`), before connecting or
   * announcing anything. Aborted while it waits for the database: the wait stops and startWorker
   * rejects (DatabaseUnavailableError). Aborted later in the start: it starts, then drains.
   */
  signal?: AbortSignal;
  /** Serve `/healthz` and `/metrics` (Prometheus) on this port (0: any free one). Default: not served; `registry` still has the metrics. */
  metricsPort?: number;
  /** Where it logs. Default: JSON on stderr at BATON_LOG_LEVEL, else warn. */
  logger?: Logger;
}

/** Health as `/healthz` reports it. */
export interface WorkerHealth {
  /** True while it runs and nothing it needs is failing. */
  healthy: boolean;
  /** Why not, in words (`stopped`, `draining`, a failing projection). */
  problems: string[];
}

/** A running embedded worker. */
export interface EmbeddedWorker {
  readonly workerId: string;
  /** The prom-client registry its metrics are in (the same metrics the CLI hosts export). */
  readonly registry: Registry;
  /** `http://host:port` of `/healthz` and `/metrics`, when `metricsPort` was given. */
  readonly metricsUrl: string | undefined;
  /** Runs in progress now. */
  inFlight(): number;
  health(): WorkerHealth;
  /**
   * Drain and stop: no new work is taken, runs finish up to the shutdown timeout and the rest
   * are handed back to another worker; then the executor and projector (if any) stop and the
   * connections close. Resolves when everything stopped; calling it again returns the same promise.
   */
  stop(reason?: string): Promise<void>;
}

/** Embedded workers started in this process so far: the second and later get `-2`, `-3`, … on the default id. */
let started = 0;

const KNOWN = ['databaseUrl', 'actions', 'builtins', 'id', 'capacity', 'natsUrl', 'executor', 'projector', 'shutdownTimeoutMs', 'signal', 'metricsPort', 'logger'];

/** Start a worker (and optionally the executor and projector) in this process. */
export async function startWorker(o: EmbeddedWorkerOptions): Promise<EmbeddedWorker> {
  if (typeof o !== 'object' || o === null) throw new InvalidInputError([{ path: 'options', message: 'required: { databaseUrl, actions, … }' }]);
  const unknown = Object.keys(o).filter((k) => !KNOWN.includes(k));
  if (unknown.length > 0) throw new InvalidInputError(unknown.map((k) => ({ path: `options.${k}`, message: unknownNameMessage('option', k, KNOWN) })));
  const wrong = optionTypeProblems(o);
  if (wrong.length > 0) throw new InvalidInputError(wrong);
  if (typeof o.databaseUrl !== 'string') throw new InvalidInputError([{ path: 'options.databaseUrl', message: 'required: postgres://user:password@host:5432/database' }]);
  if (!Array.isArray(o.actions)) throw new InvalidInputError([{ path: 'options.actions', message: 'required: an array of actions built with defineAction' }]);
  o.actions.forEach((a, i) => {
    if (!isActionDefinition(a)) throw new InvalidInputError([{ path: `options.actions[${i}]`, message: 'not an action: build it with defineAction({ name, input, run })' }]);
  });
  // A worker with nothing to offer could take no work (and its WorkerStarted needs one action).
  if (o.actions.length === 0 && o.builtins === false) throw new InvalidInputError([{ path: 'options.actions', message: 'a worker needs at least one action: give one, or leave the built-ins on (builtins: false leaves them out)' }]);
  // Nothing is started for a signal that already says stop: no worker id taken, nothing announced.
  if (o.signal?.aborted) throw new InvalidInputError([{ path: 'options.signal', message: `is already aborted${o.signal.reason !== undefined ? ` (${String(o.signal.reason)})` : ''}: the worker was not started` }]);
  const capacity = o.capacity ?? 10;
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > 100_000) throw new InvalidInputError([{ path: 'options.capacity', message: 'must be a whole number from 1 to 100000' }]);

  const config = configWithOptions(
    [
      { path: 'options.databaseUrl', variable: 'BATON_DATABASE_URL', value: o.databaseUrl },
      { path: 'options.natsUrl', variable: 'BATON_NATS_URL', value: o.natsUrl },
    ],
    { logLevel: 'warn' },
  );
  const log = componentLogger(o.logger ?? createLogger(config, { destination: 'stderr' }), 'embedded-worker');
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const actions = createActionRegistry([...(o.builtins === false ? [] : configuredBuiltinActions(config)), ...o.actions]);

  // NATS when natsUrl is given or BATON_NATS_URL is set, as every CLI host decides: a worker on the
  // Postgres queue beside an executor publishing to NATS would wait for work that never comes.
  // The signal also stops the wait for a database that is not up yet.
  const env: HostEnvironment = await openHostEnvironment({ base: { config, log, registry }, component: 'worker', transport: config.natsUrl ? 'nats' : 'postgres', ...(o.signal && { signal: o.signal }) });
  const hosts: Partial<RunningHosts> & { workers: RunningHosts['workers'] } = { workers: [] };
  let stopping: Promise<void> | undefined;
  let state: 'starting' | 'running' | 'draining' | 'stopped' = 'starting';
  const stop = (reason = 'stopped by its embedding process') =>
    (stopping ??= (async () => {
      state = 'draining';
      o.signal?.removeEventListener('abort', onAbort);
      const ok = await stopHosts(env, hosts, reason);
      state = 'stopped';
      if (!ok) log.warn('some part of the embedded worker did not stop cleanly (see the errors above)');
    })());
  const onAbort = () => void stop(`its signal aborted${o.signal?.reason ? `: ${String(o.signal.reason)}` : ''}`);

  const health = (): WorkerHealth => {
    const problems = state === 'running' ? [...env.unreachable(), ...hosts.workers.flatMap((w) => w.problems()), ...(hosts.projector?.problems() ?? [])] : [state];
    return { healthy: problems.length === 0, problems };
  };
  try {
    // The port first, as the CLI hosts bind theirs: a port that is taken refuses the start before
    // the worker announces itself (its history got WorkerStarted, Draining, Stopped for nothing).
    if (o.metricsPort !== undefined) {
      hosts.health = await startHealthServer({ host: config.apiHost, port: o.metricsPort, ...(o.metricsPort !== 0 && { portSetting: 'metricsPort' }), registry, problems: () => health().problems, log });
    }
    if (o.executor) {
      hosts.executor = startExecutorHost(env);
      await hosts.executor.ready;
    }
    if (o.projector) hosts.projector = startProjector({ pool: env.db.pool, store: env.store, log, registry });
    const worker = await startWorkerHost(env, {
      workerId: o.id ?? (++started === 1 ? defaultWorkerId() : `${defaultWorkerId()}-${started}`),
      actions,
      capacity,
      ...(o.shutdownTimeoutMs !== undefined && { shutdownTimeoutMs: o.shutdownTimeoutMs }),
    });
    hosts.workers.push(worker);
    state = 'running';
    if (o.signal?.aborted) void stop('its signal was already aborted');
    else o.signal?.addEventListener('abort', onAbort, { once: true });
    return {
      workerId: worker.workerId,
      registry,
      metricsUrl: hosts.health?.url,
      inFlight: () => worker.inFlight(),
      health,
      stop,
    };
  } catch (err) {
    await stopHosts(env, hosts, 'the embedded worker failed to start');
    throw err;
  }
}

const WORKER_ID_RULE = 'must be a string of 1 to 200 letters, digits and . _ : -';

/** Each given option of the wrong type, named (`options.executor: must be true or false`), before anything starts. */
function optionTypeProblems(o: EmbeddedWorkerOptions): { path: string; message: string }[] {
  const given = o as unknown as Record<string, unknown>;
  const problems: { path: string; message: string }[] = [];
  const check = (key: string, ok: (v: unknown) => boolean, message: string) => {
    if (given[key] !== undefined && !ok(given[key])) problems.push({ path: `options.${key}`, message });
  };
  for (const key of ['builtins', 'executor', 'projector']) check(key, (v) => typeof v === 'boolean', 'must be true or false');
  // The rule every worker id is checked by where it is recorded (its heartbeat, its events), here before anything starts.
  const id = given['id'] === undefined ? undefined : WorkerId.safeParse(given['id']);
  if (id && !id.success) problems.push({ path: 'options.id', message: typeof given['id'] === 'string' ? id.error.issues[0]!.message : WORKER_ID_RULE });
  check('natsUrl', (v) => typeof v === 'string', 'must be a string like nats://127.0.0.1:4222');
  // At most BATON_SHUTDOWN_TIMEOUT's 7 days: a timer past 2^31 - 1 ms would fire at once.
  check('shutdownTimeoutMs', (v) => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= MAX_DURATION_MS, `must be a whole number of ms from 0 to ${MAX_DURATION_MS} (7 days)`);
  check('metricsPort', (v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 65_535, 'must be a port number from 0 (any free one) to 65535');
  check('signal', (v) => v instanceof AbortSignal, 'must be an AbortSignal (from an AbortController)');
  check('logger', (v) => typeof v === 'object' && v !== null && typeof (v as { child?: unknown }).child === 'function', 'must be a pino logger');
  return problems;
}
