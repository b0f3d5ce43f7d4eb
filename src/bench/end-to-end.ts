// `baton bench`: the executor and the workers in this process as `baton dev` composes them
// (in-process-hosts.ts), the projector in a `baton projector` process of its own as deployments run
// it (or here too, --projector in-process), on a scratch database, with the full event history.
// Throughput: submit N no-op executions at once and time until every one has its
// ExecutionCompleted, sampling the projector's lag meanwhile. Pickup latency at light load:
// submit one execution at a time and time submit → the action body starting (a bench action
// marks the moment). Submissions come from another runtime and pool, as from an API or CLI.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { z } from 'zod';
import type { NatsConnection } from 'nats';
import { createActionRegistry, defineAction } from '../actions/index.ts';
import { nodeFlagsInUse } from './deployed-node.ts';
import { onInterrupt } from './interrupt.ts';
import { ConfigError } from '../errors.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { projections } from '../../projections/index.ts';
import { readCheckpoint } from '../readmodel/checkpoints.ts';
import { createExecutionRuntime } from '../runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../transport/nats/index.ts';
import { createPostgresWorkTransport } from '../transport/postgres/index.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { table } from '../cli/format.ts';
import { startInProcessHosts } from './in-process-hosts.ts';
import { startProjectorProcess } from './projector-process.ts';
import { withScratchDatabase } from './scratch-database.ts';
import { COMPLETED_HISTORY_EVENTS } from './projections.ts';
import { projectAll, seedExecutions } from './seed-history.ts';
import { startCpuAccounting, type CpuSplit } from './cpu-accounting.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';

export interface EndToEndBenchOptions {
  executions: number;
  /** Concurrent runs across all workers. */
  concurrency: number;
  workers: number;
  transport: 'nats' | 'postgres';
  /** `process`: a `baton projector` of its own, as deployed (docker-compose.yml); `in-process`: as `baton dev` runs it. */
  projector: 'process' | 'in-process';
  natsUrl?: string;
  /** Handoffs to the in-process workers start in the same append, without the transport (src/worker/eager-dispatch.ts). */
  eagerDispatch: boolean;
  latencySamples: number;
  /**
   * Ms from one latency sample's submission to the next (0: each as soon as the previous started).
   * At light load the server and the hosts sit idle between submissions and pay to wake up: on
   * the 2-core dev machine a `SELECT 1` takes 0.53 ms after a 20 ms pause and 0.16 ms back to
   * back. The default, 20 (50/s), is how ../shared/bench-peers paces its pickup samples.
   */
  latencyInterval: number;
  /**
   * Finished executions stored (and projected) before the measured phases, so they run on a store
   * with that much history, as a long-running installation's is: what history costs. 0: an empty store.
   */
  history: number;
  /** About how many bytes of JSON each throughput execution's input holds (benchInput); 0: none. */
  inputBytes: number;
  progress: (line: string) => void;
}

export interface EndToEndBenchResult {
  transport: string;
  projector: 'process' | 'in-process';
  postgres: string;
  /** The Node flags of the measured process that size its young generation (src/bench/deployed-node.ts). */
  nodeFlags: string[];
  executions: number;
  /** The bytes of JSON each throughput execution's input held (0: none). */
  inputBytes: number;
  /**
   * What the store held before the measured phases (see EndToEndBenchOptions.history), and the
   * global position the hosts' follower started after (a string: positions are bigints): the
   * read model's checkpoint, as deployed hosts start, so the history is not read again.
   */
  history: { executions: number; events: number; hostsFollowedAfter: string };
  workers: number;
  concurrency: number;
  /** Whether eager dispatch was on, and how many runs (both phases) started in their handoff's append: counted, not assumed. */
  eagerDispatch: { on: boolean; runsStartedWithHandoff: number; runs: number };
  seconds: number;
  executionsPerSec: number;
  eventsPerSec: number;
  pickupMs: { samples: number; intervalMs: number; p50: number; p95: number; p99: number; max: number };
  /** The executions projection's lag while the throughput phase ran (age of the oldest event it had not applied), sampled every 100 ms. */
  projectionLagMs: { samples: number; p50: number; p99: number; max: number };
  /** CPU per execution in the throughput phase, by process (Linux only): where the time went. */
  cpuPerExecution: CpuSplit | undefined;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (n: number) => Number(n.toFixed(2));

export async function runEndToEndBench(admin: { pool: pg.Pool; databaseUrl: string }, o: EndToEndBenchOptions): Promise<EndToEndBenchResult> {
  // Refused before a scratch database is made, with the message the hosts give (src/cli/hosts.ts).
  if (o.transport === 'nats' && !o.natsUrl) throw new ConfigError('--transport nats needs BATON_NATS_URL (e.g. nats://127.0.0.1:4222)');
  if (o.concurrency < o.workers) throw new ConfigError(`--concurrency ${o.concurrency} is fewer than --workers ${o.workers}: each worker needs room for at least one run`);
  return withScratchDatabase(admin, 24, async ({ pool, url, postgresVersion }) => {
    // Submissions come from their own pool, as they would from API or CLI processes, so they
    // queue behind each other rather than in front of the executor's and workers' queries.
    const clientPool = new pg.Pool({ connectionString: url, max: 8, ...KEEP_IDLE_CONNECTIONS });
    clientPool.on('error', () => undefined); // idle clients dropped by DROP DATABASE … FORCE
    const clientStore = createPostgresEventStore(clientPool);
    const client = createExecutionRuntime(clientStore);
    const log = pino({ level: 'silent' });
    const store = createPostgresEventStore(pool);
    let nc: NatsConnection | undefined;
    let transport: WorkTransport;
    let removeStreamsIfInterrupted = () => {};
    const suffix = randomUUID().slice(0, 8);
    if (o.transport === 'nats') {
      nc = await connectNats(o.natsUrl!);
      transport = await createNatsWorkTransport(nc, { streamName: `BATON_BENCH_${suffix}`, subjectPrefix: `baton.bench.${suffix}` });
      const natsClient = nc;
      // The hosts' connection goes first: their pull loops re-create a stream deleted under them
      // (a stream not found is provisioned again), which left both streams behind an interrupt.
      removeStreamsIfInterrupted = onInterrupt('JetStream streams', async () => {
        await natsClient.close();
        const admin = await connectNats(o.natsUrl!);
        await deleteNatsWorkStreams(admin, { streamName: `BATON_BENCH_${suffix}` }).finally(() => admin.close());
      });
    } else {
      transport = createPostgresWorkTransport(pool);
    }
    // The moment each bench action body starts, for pickup latency.
    const started = new Map<string, (at: number) => void>();
    const mark = defineAction({
      name: 'bench.mark',
      input: z.object({ token: z.string() }),
      run: ({ token }) => {
        started.get(token)?.(performance.now());
        return null;
      },
    });
    const noop = defineAction({ name: 'bench.noop', input: z.union([z.null(), z.object({ items: z.array(z.object({ sku: z.string(), qty: z.number() })) })]), run: () => null });
    const input = benchInput(o.inputBytes);
    const actions = createActionRegistry([mark, noop]);
    // --concurrency split across the workers as evenly as it goes (10 over 4: 3, 3, 2, 2), so the
    // run has exactly the concurrency asked for (it was rounded up to a multiple of --workers).
    const capacity = Array.from({ length: o.workers }, (_, i) => Math.floor(o.concurrency / o.workers) + (i < o.concurrency % o.workers ? 1 : 0));
    const workerIds = Array.from({ length: o.workers }, (_, i) => `bench-${suffix}-${i + 1}`);
    const countEvents = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events')).rows[0]!.n);
    let projectorProcess: Awaited<ReturnType<typeof startProjectorProcess>> | undefined;
    let hosts: Awaited<ReturnType<typeof startInProcessHosts>> | undefined;
    // From here on whatever fails (the projector does not start, the history cannot be stored)
    // still closes what was opened: an open NATS connection would keep the process alive for good.
    try {
      if (o.history > 0) await storeHistory(pool, store, o.history, o.progress);
      const stored = { executions: o.history, events: o.history > 0 ? await countEvents() : 0 };
      projectorProcess = o.projector === 'process' ? await startProjectorProcess(url) : undefined;
      // From the checkpoint, as `baton dev` and deployed hosts start: not by reading the history.
      hosts = await startInProcessHosts({ store, pool, transport, actions, workerIds, capacity, log, projector: o.projector === 'in-process', eagerDispatch: o.eagerDispatch, fromCheckpoint: true });
      const running = hosts;
      // Every event reaches the shared runtime's listeners once, whether appended here or read back.
      let runs = 0;
      const stopCountingStarts = running.executions.onChange((change) => {
        if (change.events.some((c) => c.event.type === 'ExecutionStarted')) runs++;
      });
      o.progress(`[1/2] pickup latency at light load: ${o.latencySamples} executions, one at a time${o.latencyInterval > 0 ? `, ${o.latencyInterval} ms apart` : ''} …`);
      const pickups: number[] = [];
      const firstAt = performance.now();
      for (let i = 0; i < o.latencySamples; i++) {
        const wait = firstAt + i * o.latencyInterval - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const token = randomUUID();
        const startedAt = new Promise<number>((resolve) => started.set(token, resolve));
        const t0 = performance.now();
        await client.submit({ action: 'bench.mark', input: { token } });
        pickups.push((await startedAt) - t0);
        started.delete(token);
      }
      pickups.sort((a, b) => a - b);

      o.progress(`[2/2] throughput: ${o.executions.toLocaleString('en')} executions, ${o.concurrency} running at once …`);
      // Completions are counted as the hosts' shared runtime records them (a worker's outcome, once
      // committed), not by following the store: a follower of its own was the bench's cost, not
      // Baton's, reading back every event of the run in the measured process.
      let completed = 0;
      let allCompleted = () => {};
      const counting = new Promise<void>((resolve) => (allCompleted = resolve));
      const stopCounting = hosts.executions.onChange((change) => {
        // bench.noop only: a pickup sample may still be finishing.
        if (change.after.context.action === 'bench.noop' && change.events.some((c) => c.event.type === 'ExecutionCompleted') && ++completed >= o.executions) allCompleted();
      });
      const eventsBefore = await countEvents();
      const lags = sampleProjectionLag(clientStore, clientPool);
      const cpu = startCpuAccounting(projectorProcess?.pid);
      const t0 = performance.now();
      for (let i = 0; i < o.executions; i += 500) {
        await Promise.all(Array.from({ length: Math.min(500, o.executions - i) }, () => client.submit({ action: 'bench.noop', input })));
      }
      await counting;
      const seconds = (performance.now() - t0) / 1000;
      const cpuPerExecution = cpu.stop(o.executions);
      stopCounting();
      stopCountingStarts();
      const lag = (await lags.stop()).sort((a, b) => a - b);
      const events = (await countEvents()) - eventsBefore; // measured, not assumed
      return {
        transport: o.transport === 'nats' ? 'NATS JetStream' : 'Postgres work queue',
        projector: o.projector,
        postgres: postgresVersion,
        nodeFlags: nodeFlagsInUse(),
        executions: o.executions,
        inputBytes: input === null ? 0 : JSON.stringify(input).length,
        history: { ...stored, hostsFollowedAfter: hosts.followedAfter().toString() },
        workers: o.workers,
        concurrency: o.concurrency,
        eagerDispatch: { on: o.eagerDispatch, runsStartedWithHandoff: hosts.eagerRuns(), runs },
        seconds: round(seconds),
        executionsPerSec: Math.round(o.executions / seconds),
        eventsPerSec: Math.round(events / seconds),
        pickupMs: { samples: pickups.length, intervalMs: o.latencyInterval, p50: round(percentile(pickups, 0.5)), p95: round(percentile(pickups, 0.95)), p99: round(percentile(pickups, 0.99)), max: round(pickups[pickups.length - 1] ?? NaN) },
        projectionLagMs: { samples: lag.length, p50: round(percentile(lag, 0.5)), p99: round(percentile(lag, 0.99)), max: round(lag[lag.length - 1] ?? NaN) },
        cpuPerExecution,
      };
    } finally {
      await hosts?.stop();
      await projectorProcess?.stop();
      await transport.close();
      // Its streams are the bench's own, as the scratch database is: gone with it, not left on the server.
      if (nc) {
        removeStreamsIfInterrupted();
        await deleteNatsWorkStreams(nc, { streamName: `BATON_BENCH_${suffix}` });
        await nc.close();
      }
      await store.close();
      await clientStore.close();
      await clientPool.end();
    }
  });
}

/**
 * An input of about `bytes` bytes of JSON, as a job's payload often is: a list of small records
 * (one ~30-byte record per 30 bytes), not one long string, which every JSON parser on the way takes
 * far faster. null for 0.
 */
export function benchInput(bytes: number): { items: { sku: string; qty: number }[] } | null {
  if (bytes === 0) return null;
  const items = Array.from({ length: Math.max(1, Math.round(bytes / 30)) }, (_, i) => ({ sku: `sku-${String(i).padStart(6, '0')}`, qty: i % 10 }));
  return { items };
}

/**
 * Store `executions` finished histories and project them before any host starts, then VACUUM
 * ANALYZE and CHECKPOINT: a store that grew over months has had autovacuum visit it and its pages
 * written out long ago, while one loaded in seconds would have autovacuum start, and the checkpoint
 * write out gigabytes of the load, in the middle of the measured run.
 */
async function storeHistory(pool: pg.Pool, store: ReturnType<typeof createPostgresEventStore>, executions: number, progress: (line: string) => void): Promise<void> {
  progress(`[history] storing ${executions.toLocaleString('en')} finished executions (${COMPLETED_HISTORY_EVENTS} events each) …`);
  await seedExecutions(store, { finished: executions, live: 0, progress });
  progress('[history] projecting them into the read model …');
  await projectAll(pool, store, progress);
  progress('[history] VACUUM ANALYZE and CHECKPOINT, as a store that grew over months has had …');
  await pool.query('VACUUM ANALYZE');
  // CHECKPOINT needs a superuser or pg_checkpoint (PostgreSQL 15+): without it, the run says so and goes on.
  await pool.query('CHECKPOINT').catch((err: unknown) => progress(`      no CHECKPOINT (${(err as Error).message}): the load's pages may still be written out during the run`));
}

export function printEndToEndBench(r: EndToEndBenchResult): string {
  return [
    `end-to-end bench — ${r.transport}, Postgres ${r.postgres}, ${r.workers} workers, ${r.concurrency} concurrent runs, ${r.projector === 'process' ? 'the projector in its own process' : 'one process, the projector in it'}, Node ${r.nodeFlags.join(' ') || 'with its default young generation'}`,
    r.history.executions > 0
      ? `on a store already holding ${r.history.executions.toLocaleString('en')} finished executions (${r.history.events.toLocaleString('en')} events, projected); the hosts followed it after position ${BigInt(r.history.hostsFollowedAfter).toLocaleString('en')}`
      : 'on an empty store (--history N runs it on N finished executions)',
    ...(r.inputBytes > 0 ? [`each throughput execution's input: ${r.inputBytes.toLocaleString('en')} bytes of JSON`] : []),
    r.eagerDispatch.on
      ? `eager dispatch on: ${r.eagerDispatch.runsStartedWithHandoff.toLocaleString('en')} of ${r.eagerDispatch.runs.toLocaleString('en')} runs started in their handoff's append, without the transport (--eager-dispatch off measures the transport)`
      : 'eager dispatch off: every run went through the transport',
    '',
    table(
      ['EXECUTIONS', 'SECONDS', 'EXECUTIONS/S', 'EVENTS/S'],
      [[r.executions.toLocaleString('en'), String(r.seconds), r.executionsPerSec.toLocaleString('en'), r.eventsPerSec.toLocaleString('en')]],
    ),
    '',
    table(['PICKUP (submit → action starts)', 'P50 MS', 'P95 MS', 'P99 MS', 'MAX MS'], [[`${r.pickupMs.samples} at light load${r.pickupMs.intervalMs > 0 ? `, ${r.pickupMs.intervalMs} ms apart` : ', back to back'}`, String(r.pickupMs.p50), String(r.pickupMs.p95), String(r.pickupMs.p99), String(r.pickupMs.max)]]),
    '',
    table(['PROJECTION LAG (executions, during the throughput run)', 'P50 MS', 'P99 MS', 'MAX MS'], [[`${r.projectionLagMs.samples} samples`, String(r.projectionLagMs.p50), String(r.projectionLagMs.p99), String(r.projectionLagMs.max)]]),
    ...(r.cpuPerExecution ? ['', cpuTable(r.cpuPerExecution, r.projector)] : []),
  ].join('\n');
}

function cpuTable(c: CpuSplit, projector: 'process' | 'in-process'): string {
  const rows: string[][] = [[projector === 'in-process' ? 'this process: submits, hosts, projector' : 'this process: submits, executor, workers', String(c.thisProcessUs)]];
  if (c.projectorUs !== undefined) rows.push(['the projector process', String(c.projectorUs)]);
  rows.push(['Postgres, NATS and the rest of the machine', String(c.restUs)], ['machine total', String(c.totalUs)]);
  return table(['CPU PER EXECUTION (throughput run)', 'µS'], rows);
}

/**
 * Every 100 ms, how old the oldest event the executions projection has not applied yet is (0
 * when it is caught up): the projector's lag as `baton_projection_lag_seconds` reports it.
 */
function sampleProjectionLag(store: { readAll: ReturnType<typeof createPostgresEventStore>['readAll'] }, pool: pg.Pool): { stop(): Promise<number[]> } {
  const executions = projections.find((p) => p.name === 'executions')!;
  const samples: number[] = [];
  let running = true;
  const sampling = (async () => {
    while (running) {
      const { position } = await readCheckpoint(pool, executions.name);
      const [next] = await store.readAll({ after: position, limit: 1, streamPrefixes: [...executions.streamPrefixes] });
      samples.push(next ? Math.max(0, Date.now() - next.recordedAt.getTime()) : 0);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      return samples;
    },
  };
}
