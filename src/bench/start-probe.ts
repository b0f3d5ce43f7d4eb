// The child process of `baton bench start` (start.ts): starts an executor host's follower, its
// executor and its workflow orchestrator over a seeded database, as startExecutorHost composes
// them, and prints how long until ready and the process's memory then. A process of its own, so
// the memory is the host's alone. argv: <database url> <checkpoint|zero> [verbose].
import pg from 'pg';
import pino from 'pino';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { startExecutor } from '../executor/executor.ts';
import { createLivenessStore } from '../liveness/liveness-store.ts';
import { silentLogger } from '../log.ts';
import { createExecutionRuntime } from '../runtime/execution-runtime.ts';
import { followActors } from '../runtime/follow-actors.ts';
import { createScheduleRuntime } from '../runtime/schedule-kind.ts';
import { readStartPoint } from '../runtime/start-point.ts';
import { createWorkerRuntime } from '../runtime/worker-kind.ts';
import { createPostgresWorkTransport } from '../transport/postgres/index.ts';
import { startOrchestrator } from '../workflow/orchestrator.ts';
import { createWorkflowRuntime } from '../workflow/workflow-stream.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';

export interface StartProbeResult {
  readyMs: number;
  rssMb: number;
  heapUsedMb: number;
  /** After a full collection: what the host keeps, not what the catch-up left for the collector. */
  rssAfterGcMb: number;
  heapUsedAfterGcMb: number;
  waiting: number;
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);

async function main(): Promise<void> {
  const [url, mode, verbose] = process.argv.slice(2);
  const began = performance.now();
  const pool = new pg.Pool({ connectionString: url, max: 8, ...KEEP_IDLE_CONNECTIONS });
  const store = createPostgresEventStore(pool);
  // `verbose`: the host's own log lines (where its start spends its time) on stderr.
  const log = verbose === 'verbose' ? pino({ level: 'info' }, pino.destination(2)) : silentLogger();
  const executions = createExecutionRuntime(store);
  const workerStreams = createWorkerRuntime(store);
  const workflows = createWorkflowRuntime(store);
  const runtimes = [executions.actors, workerStreams, workflows, createScheduleRuntime(store)];
  const startFrom = mode === 'checkpoint' ? () => readStartPoint(pool, runtimes.map((r) => r.kind.streamPrefix)) : undefined;
  const follower = followActors({ store, runtimes, log, who: 'executor', ...(startFrom && { startFrom }) });
  const executor = startExecutor({ store, actors: { executions, workerStreams, follower }, transport: createPostgresWorkTransport(pool), workers: createLivenessStore(pool), log, handleDeadLetters: false });
  const orchestrator = startOrchestrator({ store, actors: { executions, workflows, follower }, log });
  await Promise.all([executor.ready, orchestrator.ready]);
  const readyMs = Math.round(performance.now() - began);
  const at = process.memoryUsage();
  globalThis.gc?.();
  const after = process.memoryUsage();
  const result: StartProbeResult = { readyMs, rssMb: mb(at.rss), heapUsedMb: mb(at.heapUsed), rssAfterGcMb: mb(after.rss), heapUsedAfterGcMb: mb(after.heapUsed), waiting: executor.waiting() };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  await follower.stop();
  await orchestrator.stop();
  await executor.stop();
  await store.close();
  await pool.end();
}

await main();
