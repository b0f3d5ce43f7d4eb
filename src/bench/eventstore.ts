// `baton bench eventstore`: append throughput (1, 8 and 32 concurrent appenders, each append its
// own statement or through the group committer; appendMany) and rehydration time, on a scratch database
// created next to the configured one and dropped afterwards, so a bench never touches real data.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { withScratchDatabase } from './scratch-database.ts';
import { startCpuMeter, type CpuReading } from './cpu-meter.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../eventstore/postgres.ts';
import type { EventStore, NewEvent } from '../eventstore/event-store.ts';
import { createExecutionRuntime } from '../runtime/execution-runtime.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { table } from '../cli/format.ts';

export interface AppendPhaseResult {
  phase: string;
  streams: number;
  eventsPerAppend: number;
  appends: number;
  appendsPerSec: number;
  eventsPerSec: number;
  latencyMs: { p50: number; p99: number };
  /** CPU per append (µs): this process's, and the Postgres backends' (undefined when not on this machine). */
  cpuMicrosPerAppend: { client: number; server: number | undefined };
}

export interface RehydrateResult {
  events: number;
  /** `whole stream`, or `from a snapshot` (the stored snapshot 999 events behind the end: the most a load folds between two). */
  from: string;
  runs: number;
  ms: { p50: number; p95: number };
}

export interface EventStoreBenchResult {
  database: string;
  postgres: string;
  seconds: number;
  appends: AppendPhaseResult[];
  rehydrate: RehydrateResult[];
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (n: number, digits = 2) => Number(n.toFixed(digits));

function benchEvent(i: number): NewEvent {
  return { eventId: randomUUID(), type: 'BenchEvent', data: { i }, metadata: { by: 'executor', occurredAt: new Date().toISOString() } };
}

/** `appenders` loops, each appending `batch` events at a time to a stream of its own, for `seconds`. */
async function appendPhase(pool: pg.Pool, store: EventStore, phase: string, appenders: number, batch: number, seconds: number): Promise<AppendPhaseResult> {
  const latencies: number[] = [];
  const cpu = await startCpuMeter(pool);
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      const stream = `bench-${randomUUID()}`;
      let expected: bigint | 'no_stream' = 'no_stream';
      let i = 0;
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const r = await store.append(stream, Array.from({ length: batch }, () => benchEvent(i++)), { expectedRevision: expected });
        latencies.push(performance.now() - t0);
        expected = r.nextExpectedRevision;
      }
    }),
  );
  return summarise(phase, appenders, batch, latencies, (performance.now() - start) / 1000, await cpu());
}

/** One caller storing `size` streams' single-event appends per appendMany, for `seconds`. */
async function appendManyPhase(pool: pg.Pool, store: EventStore, phase: string, size: number, seconds: number): Promise<AppendPhaseResult> {
  const latencies: number[] = [];
  const cpu = await startCpuMeter(pool);
  const deadline = performance.now() + seconds * 1000;
  const start = performance.now();
  const streams = Array.from({ length: size }, () => ({ id: `bench-${randomUUID()}`, expected: 'no_stream' as bigint | 'no_stream' }));
  let i = 0;
  while (performance.now() < deadline) {
    const t0 = performance.now();
    const out = await store.appendMany(streams.map((s) => ({ streamId: s.id, events: [benchEvent(i++)], expectedRevision: s.expected })));
    const elapsed = performance.now() - t0;
    out.forEach((o, k) => {
      if (!o.ok) throw o.error;
      streams[k]!.expected = o.result.nextExpectedRevision;
      latencies.push(elapsed);
    });
  }
  return summarise(phase, 1, 1, latencies, (performance.now() - start) / 1000, await cpu());
}

function summarise(phase: string, appenders: number, batch: number, latencies: number[], elapsed: number, cpu: CpuReading): AppendPhaseResult {
  const perAppend = (ms: number) => Math.round((ms * 1000) / Math.max(1, latencies.length));
  latencies.sort((a, b) => a - b);
  return {
    phase,
    streams: appenders,
    eventsPerAppend: batch,
    appends: latencies.length,
    appendsPerSec: Math.round(latencies.length / elapsed),
    eventsPerSec: Math.round((latencies.length * batch) / elapsed),
    latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
    cpuMicrosPerAppend: { client: perAppend(cpu.clientMs), server: cpu.serverMs === undefined ? undefined : perAppend(cpu.serverMs) },
  };
}

/** A valid execution history of `count` events: the lifecycle up to Running, then progress reports. */
function executionHistory(count: number): NewEvent[] {
  const meta = (by: string) => ({ by, occurredAt: new Date().toISOString(), machineVersion: MACHINE_VERSION });
  const head: NewEvent[] = [
    { eventId: randomUUID(), type: 'ExecutionRequested', data: { action: 'bench.long', input: null, maxAttempts: 1 }, metadata: meta('executor') },
    { eventId: randomUUID(), type: 'ExecutionHandedOff', data: { workerId: 'bench', attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString(), maxAttempts: 1 }, metadata: meta('executor') },
    { eventId: randomUUID(), type: 'ExecutionStarted', data: { attempt: 1 }, metadata: meta('worker:bench') },
  ];
  const progress = Array.from({ length: count - head.length }, (_, i) => ({
    eventId: randomUUID(),
    type: 'ExecutionProgressed',
    data: { details: { step: i } },
    metadata: meta('worker:bench'),
  }));
  return [...head, ...progress];
}

async function appendHistory(store: PostgresEventStore, id: string, history: NewEvent[], expected: bigint | 'no_stream'): Promise<bigint | 'no_stream'> {
  for (let i = 0; i < history.length; i += 1000) {
    expected = (await store.append(executionStreamId(id), history.slice(i, i + 1000), { expectedRevision: expected })).nextExpectedRevision;
  }
  return expected;
}

async function timeLoads(load: () => Promise<{ revision: bigint }>, count: number, runs: number): Promise<{ p50: number; p95: number }> {
  await load(); // warm up: prepared statements, JIT
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    const loaded = await load();
    times.push(performance.now() - t0);
    if (loaded.revision !== BigInt(count - 1)) throw new Error(`rehydrated ${loaded.revision + 1n} events, expected ${count}`);
  }
  times.sort((a, b) => a - b);
  return { p50: round(percentile(times, 0.5)), p95: round(percentile(times, 0.95)) };
}

/**
 * A `count`-event execution loaded for a decision: folded from its whole stream, then (streams
 * of 2,000 events or more) from a stored snapshot 999 events behind its end, the most a load
 * folds between two snapshots (src/runtime/stream-snapshots.ts).
 */
async function rehydratePhase(store: PostgresEventStore, count: number, runs: number): Promise<RehydrateResult[]> {
  const id = randomUUID();
  const history = executionHistory(count);
  const head = count >= 2_000 ? count - 999 : count;
  const expected = await appendHistory(store, id, history.slice(0, head), 'no_stream');
  const runtime = createExecutionRuntime(store);
  if (head === count) return [{ events: count, from: 'whole stream', runs, ms: await timeLoads(() => runtime.load(id, { whole: true }), count, runs) }];
  await runtime.load(id, { whole: true }); // folds `head` events: writes a snapshot at its end, in the background
  for (let i = 0; i < 500 && (await store.snapshots!.read(executionStreamId(id)))?.revision !== BigInt(head - 1); i++) await new Promise((r) => setTimeout(r, 10));
  await appendHistory(store, id, history.slice(head), expected);
  // From the snapshot first: a whole load writes a snapshot at the end, which would leave nothing to fold.
  const fromSnapshot = await timeLoads(() => runtime.load(id), count, runs * 10);
  const whole = await timeLoads(() => runtime.load(id, { whole: true }), count, runs);
  return [
    { events: count, from: 'whole stream', runs, ms: whole },
    { events: count, from: 'from a snapshot', runs: runs * 10, ms: fromSnapshot },
  ];
}

export async function runEventStoreBench(
  ctx: { pool: pg.Pool; databaseUrl: string },
  o: { seconds: number; largeHistory?: number; streams?: number; progress: (line: string) => void },
): Promise<EventStoreBenchResult> {
  const largeHistory = o.largeHistory ?? 100_000;
  const most = o.streams ?? 32;
  const counts = [...new Set([1, 8, most].filter((n) => n <= most))];
  // One connection per appender when each append is its own statement, and a few for the rest.
  return withScratchDatabase(ctx, most + 6, async ({ pool, postgresVersion }) => {
    const alone = createPostgresEventStore(pool, { groupCommit: false });
    const grouped = createPostgresEventStore(pool);
    try {
      const phases: [string, () => Promise<AppendPhaseResult>][] = [
        ...counts.flatMap((n): [string, () => Promise<AppendPhaseResult>][] => [
          [`${n} appender${n > 1 ? 's' : ''}, one statement per append`, () => appendPhase(pool, alone, `${n} appender${n > 1 ? 's' : ''}, one statement per append`, n, 1, o.seconds)],
          [`${n} appender${n > 1 ? 's' : ''}, group commit`, () => appendPhase(pool, grouped, `${n} appender${n > 1 ? 's' : ''}, group commit`, n, 1, o.seconds)],
        ]),
        [`${most} appenders, batches of 6, group commit`, () => appendPhase(pool, grouped, `${most} appenders, batches of 6, group commit`, most, 6, o.seconds)],
        ['appendMany of 256 streams', () => appendManyPhase(pool, grouped, 'appendMany of 256 streams', 256, o.seconds)],
      ];
      const total = phases.length + 2;
      const appends: AppendPhaseResult[] = [];
      for (const [i, [label, run]] of phases.entries()) {
        o.progress(`[${i + 1}/${total}] appending: ${label} for ${o.seconds}s …`);
        appends.push(await run());
      }
      o.progress(`[${total - 1}/${total}] rehydrating a 1,000-event execution …`);
      const small = await rehydratePhase(alone, 1_000, 30);
      o.progress(`[${total}/${total}] rehydrating a ${largeHistory.toLocaleString('en')}-event execution …`);
      const large = await rehydratePhase(alone, largeHistory, 3);
      return { database: 'postgres (scratch database, dropped)', postgres: postgresVersion, seconds: o.seconds, appends, rehydrate: [...small, ...large] };
    } finally {
      await grouped.close();
      await alone.close();
    }
  }, `--streams ${most}`);
}

export function printEventStoreBench(r: EventStoreBenchResult): string {
  return [
    `event store bench — Postgres ${r.postgres}, ${r.seconds}s per phase`,
    '',
    table(
      ['PHASE', 'APPENDS/S', 'EVENTS/S', 'P50 MS', 'P99 MS', 'CPU µS/APPEND (CLIENT+PG)'],
      r.appends.map((a) => [
        a.phase,
        String(a.appendsPerSec),
        String(a.eventsPerSec),
        String(a.latencyMs.p50),
        String(a.latencyMs.p99),
        `${a.cpuMicrosPerAppend.client}+${a.cpuMicrosPerAppend.server ?? '?'}`,
      ]),
    ),
    '',
    table(
      ['REHYDRATE', 'FROM', 'RUNS', 'P50 MS', 'P95 MS'],
      r.rehydrate.map((h) => [`${h.events.toLocaleString('en')} events`, h.from, String(h.runs), String(h.ms.p50), String(h.ms.p95)]),
    ),
  ].join('\n');
}
