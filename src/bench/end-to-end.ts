// `baton bench`: an executor and workers in this process, on a scratch database, with the full
// event history. Throughput: submit N no-op executions at once and time until every one has
// its ExecutionCompleted. Pickup latency at light load: submit one execution at a time and
// time submit → the action body starting (a bench action marks the moment).
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { z } from 'zod';
import type { NatsConnection } from 'nats';
import { createActionRegistry, defineAction } from '../actions/index.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { START } from '../eventstore/event-store.ts';
import { startExecutor } from '../executor/executor.ts';
import { createLivenessStore } from '../liveness/liveness-store.ts';
import { createExecutionRuntime } from '../runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport } from '../transport/nats/index.ts';
import { createPostgresWorkTransport } from '../transport/postgres/index.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { startWorkerHost } from '../worker/worker-host.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { table } from '../cli/format.ts';
import { withScratchDatabase } from './scratch-database.ts';

export interface EndToEndBenchOptions {
  executions: number;
  /** Concurrent runs across all workers. */
  concurrency: number;
  workers: number;
  transport: 'nats' | 'postgres';
  natsUrl?: string;
  latencySamples: number;
  progress: (line: string) => void;
}

export interface EndToEndBenchResult {
  transport: string;
  postgres: string;
  executions: number;
  workers: number;
  concurrency: number;
  seconds: number;
  executionsPerSec: number;
  eventsPerSec: number;
  pickupMs: { samples: number; p50: number; p95: number; p99: number; max: number };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (n: number) => Number(n.toFixed(2));

export async function runEndToEndBench(admin: { pool: pg.Pool; databaseUrl: string }, o: EndToEndBenchOptions): Promise<EndToEndBenchResult> {
  return withScratchDatabase(admin, 24, async ({ pool, url, postgresVersion }) => {
    // Submissions come from their own pool, as they would from API or CLI processes, so they
    // queue behind each other rather than in front of the executor's and workers' queries.
    const clientPool = new pg.Pool({ connectionString: url, max: 8 });
    clientPool.on('error', () => undefined); // idle clients dropped by DROP DATABASE … FORCE
    const clientStore = createPostgresEventStore(clientPool);
    const client = createExecutionRuntime(clientStore);
    const log = pino({ level: 'silent' });
    const store = createPostgresEventStore(pool);
    const runtime = createExecutionRuntime(store);
    const liveness = createLivenessStore(pool);
    let nc: NatsConnection | undefined;
    let transport: WorkTransport;
    const suffix = randomUUID().slice(0, 8);
    if (o.transport === 'nats') {
      if (!o.natsUrl) throw new Error('--transport nats needs BATON_NATS_URL');
      nc = await connectNats(o.natsUrl);
      transport = await createNatsWorkTransport(nc, { streamName: `BATON_BENCH_${suffix}`, subjectPrefix: `baton.bench.${suffix}` });
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
    const noop = defineAction({ name: 'bench.noop', input: z.null(), run: () => null });
    const actions = createActionRegistry([mark, noop]);
    const executor = startExecutor({ store, transport, workers: liveness, log });
    await executor.ready;
    const capacity = Math.max(1, Math.ceil(o.concurrency / o.workers));
    const workers = await Promise.all(
      Array.from({ length: o.workers }, (_, i) =>
        startWorkerHost({ workerId: `bench-${suffix}-${i + 1}`, store, runtime, transport, liveness, actions, capacity, log }),
      ),
    );
    try {
      o.progress(`[1/2] pickup latency at light load: ${o.latencySamples} executions, one at a time …`);
      const pickups: number[] = [];
      for (let i = 0; i < o.latencySamples; i++) {
        const token = randomUUID();
        const startedAt = new Promise<number>((resolve) => started.set(token, resolve));
        const t0 = performance.now();
        await client.submit({ action: 'bench.mark', input: { token } });
        pickups.push((await startedAt) - t0);
        started.delete(token);
      }
      pickups.sort((a, b) => a - b);

      o.progress(`[2/2] throughput: ${o.executions.toLocaleString('en')} executions, ${o.concurrency} running at once …`);
      let completed = 0;
      const countEvents = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events')).rows[0]!.n);
      const eventsBefore = await countEvents();
      const ac = new AbortController();
      const counting = (async () => {
        for await (const e of store.subscribe({ after: START, streamPrefixes: [EXECUTION_STREAM_PREFIX], signal: ac.signal, batchSize: 2_000 })) {
          if (e.type === 'ExecutionCompleted') completed++;
          if (completed >= o.latencySamples + o.executions) break;
        }
      })();
      const t0 = performance.now();
      for (let i = 0; i < o.executions; i += 500) {
        await Promise.all(Array.from({ length: Math.min(500, o.executions - i) }, () => client.submit({ action: 'bench.noop', input: null })));
      }
      await counting;
      const seconds = (performance.now() - t0) / 1000;
      ac.abort();
      const events = (await countEvents()) - eventsBefore; // measured, not assumed
      return {
        transport: o.transport === 'nats' ? 'NATS JetStream' : 'Postgres work queue',
        postgres: postgresVersion,
        executions: o.executions,
        workers: o.workers,
        concurrency: capacity * o.workers,
        seconds: round(seconds),
        executionsPerSec: Math.round(o.executions / seconds),
        eventsPerSec: Math.round(events / seconds),
        pickupMs: { samples: pickups.length, p50: round(percentile(pickups, 0.5)), p95: round(percentile(pickups, 0.95)), p99: round(percentile(pickups, 0.99)), max: round(pickups[pickups.length - 1] ?? NaN) },
      };
    } finally {
      await Promise.all(workers.map((w) => w.stop('bench finished')));
      await executor.stop();
      await transport.close();
      await nc?.close();
      await store.close();
      await clientStore.close();
      await clientPool.end();
    }
  });
}

export function printEndToEndBench(r: EndToEndBenchResult): string {
  return [
    `end-to-end bench — ${r.transport}, Postgres ${r.postgres}, ${r.workers} workers, ${r.concurrency} concurrent runs, one process`,
    '',
    table(
      ['EXECUTIONS', 'SECONDS', 'EXECUTIONS/S', 'EVENTS/S'],
      [[r.executions.toLocaleString('en'), String(r.seconds), r.executionsPerSec.toLocaleString('en'), r.eventsPerSec.toLocaleString('en')]],
    ),
    '',
    table(['PICKUP (submit → action starts)', 'P50 MS', 'P95 MS', 'P99 MS', 'MAX MS'], [[`${r.pickupMs.samples} at light load`, String(r.pickupMs.p50), String(r.pickupMs.p95), String(r.pickupMs.p99), String(r.pickupMs.max)]]),
  ].join('\n');
}
