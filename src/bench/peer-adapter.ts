// Baton in the shared peer benchmark (../shared/bench-peers: graphile-worker, pg-boss, BullMQ and
// Baton through one harness in one run). The harness imports this module through tsx and calls
// `create(cfg)` for the 7-method interface its README describes; keeping it here means the
// benchmark measures Baton through the project's own wiring as the internals change.
//
//   variant "postgres": the Postgres work queue;  variant "nats": JetStream at $NATS_URL
//   enqueueOne  = the runtime's submit (one ExecutionRequested; concurrent ones share a commit)
//   enqueueMany = the runtime's submitMany (one appendMany)
//   setup       = the migrations, and the projector in a `baton projector` process of its own that
//                 runs until close(), as deployments run it (docker-compose.yml: beside the
//                 hosts, for as long as the database is in use, not started with a worker).
//                 BATON_PEER_PROJECTOR=with-worker starts it with each worker instead (how this
//                 adapter ran until 2026-11-29: the drain then also projected the backlog's
//                 requests, submitted before any projector ran), =in-process puts it in the
//                 worker child, =none leaves it out (to see what it costs; the issue's figures
//                 are always taken with it)
//   startWorker = the executor, orchestrator and one worker (capacity = concurrency) in the worker
//                 child process as `baton dev` composes them (in-process-hosts.ts). Handoffs to
//                 that worker start in the same append, without the transport, as in `baton dev`
//                 (src/worker/eager-dispatch.ts); BATON_EAGER_DISPATCH=off sends every run
//                 through the transport. Action `bench.peer` calls handler(input)
//   pending()   = executions whose last event left them in a non-final state (metadata.stateAfter)
//   clear()     = TRUNCATE of Baton's tables (the read model's too, checkpoints back to 0), and
//                 this run's JetStream streams; the projector is stopped for it and started again
import pg from 'pg';
import pino from 'pino';
import { finalStatuses } from '../../actors/execution.machine.ts';
import { createActionRegistry, defineAction } from '../actions/index.ts';
import { migrateAll } from '../db/all-migrations.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createExecutionRuntime, type SubmitRequest } from '../runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../transport/nats/index.ts';
import { createPostgresWorkTransport } from '../transport/postgres/index.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { jsonValue } from '../input/schemas.ts';
import { count, onOff } from '../config-values.ts';
import { startInProcessHosts } from './in-process-hosts.ts';
import { startProjectorProcess, type ProjectorProcess } from './projector-process.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';
import { onInterrupt } from './interrupt.ts';

const ACTION = 'bench.peer';
const PENDING_SQL = `
  SELECT count(*)::int AS n
  FROM baton_streams s JOIN baton_events e ON e.stream_id = s.stream_id AND e.revision = s.revision
  WHERE s.stream_id LIKE 'execution-%' AND NOT (e.metadata->>'stateAfter' = ANY($1::text[]))`;
// Events and everything derived from them: the read model's tables (whichever exist) and the
// projections' checkpoints go back to the start with the events, or the next phase's projector
// would resume from a position that no longer exists.
const CLEAR_SQL = `
  DO $$ DECLARE t text; BEGIN
    TRUNCATE baton_events, baton_streams, baton_snapshots, baton_work_queue, baton_dead_letters, baton_worker_liveness;
    FOR t IN SELECT format('%I.%I', schemaname, tablename) FROM pg_tables WHERE schemaname = 'baton_read' LOOP
      EXECUTE 'TRUNCATE ' || t;
    END LOOP;
    UPDATE baton_projection_checkpoints SET position = 0, events_applied = 0, last_recorded_at = NULL;
  END $$`;

export interface PeerConfig {
  pgUrl: string;
  variant?: string;
}

export async function create(cfg: PeerConfig) {
  const variant = cfg.variant ?? 'postgres';
  if (variant !== 'postgres' && variant !== 'nats') throw new Error(`baton peer adapter: unknown variant ${variant} (postgres | nats)`);
  const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:54222';
  const submitPool = poolSize('BATON_SUBMIT_POOL', 10);
  const eager = fromEnvironment('BATON_EAGER_DISPATCH', onOff);
  const workerPool = poolSize('BATON_POOL', 24);
  if (typeof cfg.pgUrl !== 'string' || !URL.canParse(cfg.pgUrl)) throw new Error(`baton peer adapter: cfg.pgUrl must be a postgres:// URL (got ${JSON.stringify(cfg.pgUrl)})`);
  const db = new URL(cfg.pgUrl).pathname.slice(1).replace(/[^A-Za-z0-9_-]/g, '_') || 'peers';
  const natsOptions = { streamName: `BATON_PEERS_${db}`, subjectPrefix: `peers.${db}` };
  const log = pino({ level: process.env.BATON_LOG_LEVEL ?? 'silent' });

  // Submits come from their own pool, as from an API or CLI process.
  const pool = new pg.Pool({ connectionString: cfg.pgUrl, max: submitPool, ...KEEP_IDLE_CONNECTIONS });
  const check = new pg.Pool({ connectionString: cfg.pgUrl, max: 1 });
  pool.on('error', () => undefined);
  check.on('error', () => undefined);
  const clientStore = createPostgresEventStore(pool);
  const client = createExecutionRuntime(clientStore);
  const request = (payload: unknown): SubmitRequest => ({ action: ACTION, input: payload });
  let adminNc: Awaited<ReturnType<typeof connectNats>> | undefined;

  async function deleteNatsStreams() {
    adminNc ??= await connectPeersNats(natsUrl);
    await deleteNatsWorkStreams(adminNc, natsOptions);
  }
  // This run's streams go with it, also when the harness is interrupted (as the projector process does).
  let keepStreamsIfInterrupted = () => {};
  // The workers' NATS connections, closed before the streams go on an interrupt: their pull loops
  // would provision a deleted stream again (as `baton bench` found, src/bench/end-to-end.ts).
  const workerConnections = new Set<Awaited<ReturnType<typeof connectNats>>>();

  // Where the projector runs (see the top of this file): a process of its own from setup() to
  // close() unless BATON_PEER_PROJECTOR says otherwise.
  const projectorMode = process.env.BATON_PEER_PROJECTOR ?? 'process';
  if (!['process', 'with-worker', 'in-process', 'none'].includes(projectorMode)) {
    throw new Error(`baton peer adapter: BATON_PEER_PROJECTOR=${projectorMode} is not one of process, with-worker, in-process, none`);
  }
  let projector: ProjectorProcess | undefined;
  const startProjector = async () => {
    if (projectorMode === 'process') projector = await startProjectorProcess(cfg.pgUrl);
  };
  const stopProjector = async () => {
    await projector?.stop();
    projector = undefined;
  };

  let running: { stop(): Promise<void> } | undefined;
  let closing: Promise<void> | undefined;
  return {
    // With eager dispatch (the default, as `baton dev` runs) the worker shares the executor's process
    // and its runs start in the handoff's append: the transport carries none of them, and the name says so.
    name: `Baton (${variant === 'nats' ? 'JetStream transport' : 'Postgres work queue'}${eager ? ', eager dispatch: runs bypass it' : ''})`,
    async setup() {
      await migrateAll(pool);
      if (variant === 'nats') {
        await deleteNatsStreams();
        keepStreamsIfInterrupted = onInterrupt('JetStream streams', async () => {
          await Promise.all([...workerConnections].map((c) => c.close()));
          await deleteNatsStreams();
        });
      }
      await startProjector();
    },
    async enqueueMany(payloads: unknown[]) {
      await client.submitMany(payloads.map(request));
    },
    async enqueueOne(payload: unknown) {
      await client.submit(request(payload));
    },
    async clear() {
      // Stopped first: its position and what it remembers of its rows would outlive the truncate.
      const wasRunning = projector !== undefined;
      await stopProjector();
      await check.query(CLEAR_SQL);
      if (variant === 'nats') await deleteNatsStreams();
      if (wasRunning) await startProjector();
    },
    async pending() {
      const { rows } = await check.query<{ n: number }>(PENDING_SQL, [[...finalStatuses]]);
      return rows[0]!.n;
    },
    async startWorker({ concurrency, handler }: { concurrency: number; handler: (payload: unknown) => Promise<void> }) {
      const wpool = new pg.Pool({ connectionString: cfg.pgUrl, max: workerPool, ...KEEP_IDLE_CONNECTIONS });
      wpool.on('error', () => undefined);
      const store = createPostgresEventStore(wpool);
      let nc: Awaited<ReturnType<typeof connectNats>> | undefined;
      let transport: WorkTransport;
      if (variant === 'nats') {
        nc = await connectPeersNats(natsUrl);
        workerConnections.add(nc);
        transport = await createNatsWorkTransport(nc, natsOptions);
      } else {
        transport = createPostgresWorkTransport(wpool);
      }
      const actions = createActionRegistry([
        defineAction({ name: ACTION, input: jsonValue(), run: async (input) => { await handler(input); return null; } }),
      ]);
      const inProcessProjector = projectorMode === 'in-process';
      const workerProjector = projectorMode === 'with-worker' ? await startProjectorProcess(cfg.pgUrl) : undefined;
      const hosts = await startInProcessHosts({ store, pool: wpool, transport, actions, workerIds: [`peers-${process.pid}-${Date.now().toString(36)}`], capacity: concurrency, log, projector: inProcessProjector, eagerDispatch: eager });
      let stopping: Promise<void> | undefined;
      running = {
        stop: () =>
          (stopping ??= (async () => {
            await hosts.stop();
            await workerProjector?.stop();
            await transport.close();
            await nc?.close();
            if (nc) workerConnections.delete(nc);
            await store.close();
            await wpool.end();
          })()),
      };
      return running;
    },
    // Once, whatever happened before (a setup that failed, a second call): every step is tried and
    // the pools always end; the first failure is thrown after.
    close: () =>
      (closing ??= (async () => {
        const failures: unknown[] = [];
        const attempt = async (step: () => Promise<unknown>) => step().catch((err: unknown) => void failures.push(err));
        await attempt(async () => running?.stop());
        await attempt(stopProjector);
        // Nothing of this run left on the server; a server never reached holds nothing of it.
        if (variant === 'nats') await attempt(async () => (adminNc ? deleteNatsStreams() : undefined));
        keepStreamsIfInterrupted();
        await attempt(() => clientStore.close());
        await attempt(async () => adminNc?.close());
        await attempt(() => pool.end());
        await attempt(() => check.end());
        if (failures.length > 0) throw failures[0];
      })()),
  };
}

/** A pool size from the environment (the harness's knobs) as config reads a count, or a one-line refusal. */
function poolSize(name: string, fallback: number): number {
  return fromEnvironment(name, count(fallback, 'number of connections'));
}

/** A setting from the environment as config reads it, or a one-line refusal naming the variable. */
function fromEnvironment<T>(name: string, schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: { issues: { message: string }[] } } }): T {
  const r = schema.safeParse(process.env[name]);
  if (!r.success) throw new Error(`baton peer adapter: ${name}=${process.env[name]}: ${r.error.issues[0]!.message}`);
  return r.data;
}

/** connectNats, its refusal naming the variable this adapter reads (the harness's NATS_URL). */
async function connectPeersNats(url: string) {
  try {
    return await connectNats(url);
  } catch (err) {
    if (err instanceof Error) err.message = err.message.replace('(BATON_NATS_URL)', '(NATS_URL, as the harness sets it)');
    throw err;
  }
}
