// `baton bench projections`: how fast the projector folds events into the read model.
// Catch-up: append N complete execution histories (completedHistory), then time each projection
// catching up from position 0 (what a rebuild costs). Live lag: with the projector following,
// append executions steadily and time append → the row committed (its NOTIFY arriving).
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { projections } from '../../projections/index.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { table } from '../cli/format.ts';
import type { NewEvent } from '../eventstore/event-store.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../eventstore/postgres.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from '../readmodel/notifications.ts';
import { startProjector } from '../readmodel/projector-host.ts';
import { catchUpProjection } from '../readmodel/group-follow.ts';
import { withScratchDatabase } from './scratch-database.ts';
import { newId } from '../ids.ts';

export interface ProjectionBenchResult {
  postgres: string;
  executions: number;
  catchUp: { projection: string; events: number; seconds: number; eventsPerSec: number }[];
  live: { executionsPerSec: number; seconds: number; lagMs: { samples: number; p50: number; p95: number; p99: number; max: number } };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
const round = (n: number) => Number(n.toFixed(2));

/**
 * A complete history as machine version 7 writes it: requested → handed off (recording the attempt
 * limit) → running → one progress report → completed. Until 2026-11-29 it had version 6's shape
 * (SchedulingStarted before the handoff, 6 events), which the figures in docs/benchmarks-history.md
 * from before that day were taken on.
 */
export function completedHistory(workerId: string): NewEvent[] {
  const t = Date.now();
  const meta = (by: string, dt: number) => ({ by, occurredAt: new Date(t + dt).toISOString(), machineVersion: MACHINE_VERSION });
  const worker = `worker:${workerId}`;
  return [
    { type: 'ExecutionRequested', data: { action: 'bench.noop', input: null, maxAttempts: 1 }, metadata: meta('executor', 0) },
    { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: new Date(t + 30_000).toISOString(), maxAttempts: 1 }, metadata: meta('executor', 2) },
    { type: 'ExecutionStarted', data: { attempt: 1 }, metadata: meta(worker, 3) },
    { type: 'ExecutionProgressed', data: { details: { pct: 50 } }, metadata: meta(worker, 5) },
    { type: 'ExecutionCompleted', data: { result: { ok: true } }, metadata: meta(worker, 9) },
  ].map((e) => ({ ...e, eventId: newId() }));
}

/** How many events completedHistory holds, for the benches' messages. */
export const COMPLETED_HISTORY_EVENTS = completedHistory('count').length;

export async function appendHistories(store: PostgresEventStore, count: number, concurrency = 32): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const id = randomUUID();
        await store.append(executionStreamId(id), completedHistory(`bench-${next % 4}`), { expectedRevision: 'no_stream' });
        ids.push(id);
      }
    }),
  );
  return ids;
}

export async function runProjectionBench(
  admin: { pool: pg.Pool; databaseUrl: string },
  o: { executions: number; liveSeconds: number; liveRate: number; progress: (line: string) => void },
): Promise<ProjectionBenchResult> {
  return withScratchDatabase(admin, 16, async ({ pool, url, postgresVersion }) => {
    const store = createPostgresEventStore(pool);
    try {
      o.progress(`[1/3] appending ${o.executions.toLocaleString('en')} execution histories (${COMPLETED_HISTORY_EVENTS} events each) …`);
      await appendHistories(store, o.executions);

      o.progress('[2/3] catching up each projection from position 0 …');
      const catchUp: ProjectionBenchResult['catchUp'] = [];
      for (const projection of projections) {
        const t0 = performance.now();
        const events = await catchUpProjection({ pool, store, projection });
        const seconds = (performance.now() - t0) / 1000;
        catchUp.push({ projection: projection.name, events, seconds: round(seconds), eventsPerSec: Math.round(events / seconds) });
      }

      o.progress(`[3/3] live: ${o.liveRate} executions/s for ${o.liveSeconds} s with the projector following …`);
      const listener = new pg.Client({ connectionString: url });
      await listener.connect();
      const appendedAt = new Map<string, number>();
      const lags: number[] = [];
      listener.on('notification', (n) => {
        const now = performance.now();
        for (const id of (n.payload ?? '').split(',')) {
          const t = appendedAt.get(id);
          if (t === undefined) continue;
          lags.push(now - t);
          appendedAt.delete(id);
        }
      });
      await listener.query(`LISTEN ${EXECUTIONS_CHANGED_CHANNEL}`);
      const projector = startProjector({ pool, store, log: pino({ level: 'silent' }), driftIntervalMs: 0 });
      const t0 = performance.now();
      let sent = 0;
      try {
        // Steady load: the k-th execution is due at k / rate s (k from 0), so the run sends rate ×
        // seconds of them (it stopped one short, and at 1/s for 1 s sent none); each tick appends
        // what is due so far, so a slow append is caught up.
        const total = Math.round(o.liveSeconds * o.liveRate);
        while (sent < total) {
          const owed = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * o.liveRate) + 1) - sent;
          await Promise.all(
            Array.from({ length: Math.max(0, owed) }, async () => {
              const id = randomUUID();
              const history = completedHistory('bench-live');
              await store.append(executionStreamId(id), history, { expectedRevision: 'no_stream' });
              appendedAt.set(id, performance.now());
            }),
          );
          sent += Math.max(0, owed);
          await new Promise((r) => setTimeout(r, 5));
        }
        const end = performance.now() + 10_000;
        while (appendedAt.size > 0 && performance.now() < end) await new Promise((r) => setTimeout(r, 10));
      } finally {
        await projector.stop();
        await listener.end();
      }
      const seconds = (performance.now() - t0) / 1000;
      lags.sort((a, b) => a - b);
      return {
        postgres: postgresVersion,
        executions: o.executions,
        catchUp,
        live: {
          executionsPerSec: Math.round(sent / o.liveSeconds),
          seconds: round(seconds),
          lagMs: { samples: lags.length, p50: round(percentile(lags, 0.5)), p95: round(percentile(lags, 0.95)), p99: round(percentile(lags, 0.99)), max: round(lags[lags.length - 1] ?? NaN) },
        },
      };
    } finally {
      await store.close();
    }
  });
}

export function printProjectionBench(r: ProjectionBenchResult): string {
  return [
    `projection bench — Postgres ${r.postgres}, ${r.executions.toLocaleString('en')} execution histories of ${COMPLETED_HISTORY_EVENTS} events`,
    '',
    table(['CATCH-UP FROM 0', 'EVENTS', 'SECONDS', 'EVENTS/S'], r.catchUp.map((c) => [c.projection, c.events.toLocaleString('en'), String(c.seconds), c.eventsPerSec.toLocaleString('en')])),
    '',
    table(
      ['LIVE (append → row committed)', 'P50 MS', 'P95 MS', 'P99 MS', 'MAX MS'],
      [[`${r.live.lagMs.samples} executions at ${r.live.executionsPerSec}/s`, String(r.live.lagMs.p50), String(r.live.lagMs.p95), String(r.live.lagMs.p99), String(r.live.lagMs.max)]],
    ),
  ].join('\n');
}
