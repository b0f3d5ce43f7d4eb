// `baton bench submit`: how fast submissions are stored, through the front door every caller
// uses (the submission check, then the runtime): single submits with 32 in flight, each awaited
// (issue 16's target ≥ 3,000/s), and bulk submits of batches through submitMany's one appendMany
// (≥ 20,000/s). On a scratch database created beside the configured one and dropped afterwards.
import type pg from 'pg';
import { createActionRegistry } from '../actions/registry.ts';
import { builtinActions } from '../actions/builtin.ts';
import { table } from '../cli/format.ts';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { createExecutionRuntime } from '../runtime/execution-runtime.ts';
import { API_NAMES, apiItemNames, submitExecution, submitExecutions } from '../runtime/submission.ts';
import { withScratchDatabase } from './scratch-database.ts';

export interface SubmitPhaseResult {
  phase: string;
  /** Calls in flight at once. */
  inFlight: number;
  /** Submissions per call. */
  batch: number;
  submitted: number;
  seconds: number;
  perSecond: number;
  /** Per call, in ms. */
  latencyMs: { p50: number; p99: number };
}

export interface SubmitBenchResult {
  database: string;
  postgres: string;
  phases: SubmitPhaseResult[];
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (n: number, digits = 2) => Number(n.toFixed(digits));

async function phase(label: string, inFlight: number, batch: number, seconds: number, call: (i: number) => Promise<unknown>): Promise<SubmitPhaseResult> {
  const latencies: number[] = [];
  let next = 0;
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        await call(next++);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const submitted = latencies.length * batch;
  return {
    phase: label,
    inFlight,
    batch,
    submitted,
    seconds: round(elapsed),
    perSecond: Math.round(submitted / elapsed),
    latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
  };
}

export async function runSubmitBench(
  ctx: { pool: pg.Pool; databaseUrl: string },
  o: { seconds: number; inFlight: number; batchSize: number; progress: (line: string) => void },
): Promise<SubmitBenchResult> {
  return withScratchDatabase(ctx, o.inFlight + 8, async ({ pool, postgresVersion }) => {
    const store = createPostgresEventStore(pool);
    const deps = { runtime: createExecutionRuntime(store), actions: createActionRegistry([...builtinActions]) };
    const one = (i: number) => ({ action: 'core.echo', input: { i } });
    const names = apiItemNames('inputs');
    try {
      // Warm up: prepared statements, the JIT, the pool's connections.
      await Promise.all(Array.from({ length: o.inFlight }, (_, i) => submitExecution(deps, one(i), API_NAMES)));
      const phases: [string, number, number, (i: number) => Promise<unknown>][] = [
        [`single submits, ${o.inFlight} in flight`, o.inFlight, 1, (i) => submitExecution(deps, one(i), API_NAMES)],
        [`bulk, batches of ${o.batchSize}, 1 in flight`, 1, o.batchSize, (i) => submitExecutions(deps, Array.from({ length: o.batchSize }, (_, j) => one(i * o.batchSize + j)), names)],
        [`bulk, batches of ${o.batchSize}, 4 in flight`, 4, o.batchSize, (i) => submitExecutions(deps, Array.from({ length: o.batchSize }, (_, j) => one(i * o.batchSize + j)), names)],
      ];
      const results: SubmitPhaseResult[] = [];
      for (const [i, [label, inFlight, batch, call]] of phases.entries()) {
        o.progress(`[${i + 1}/${phases.length}] ${label} for ${o.seconds}s …`);
        results.push(await phase(label, inFlight, batch, o.seconds, call));
      }
      return { database: 'postgres (scratch database, dropped)', postgres: postgresVersion, phases: results };
    } finally {
      await store.close();
    }
  }, `--in-flight ${o.inFlight}`);
}

export function printSubmitBench(r: SubmitBenchResult): string {
  return [
    `submission benchmark on ${r.database}, Postgres ${r.postgres} (through the submission check and the runtime; no executor or workers)`,
    table(
      ['PHASE', 'SUBMITTED', 'PER SECOND', 'CALL p50 ms', 'CALL p99 ms'],
      r.phases.map((p) => [p.phase, p.submitted.toLocaleString('en'), p.perSecond.toLocaleString('en'), String(p.latencyMs.p50), String(p.latencyMs.p99)]),
    ),
  ].join('\n');
}
