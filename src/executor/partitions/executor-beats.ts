// Executor heartbeats in Postgres (table baton_executor_liveness, migration set `liveness`):
// what the lease planner reads to tell a live executor from a dead one. Ages use the
// database's clock, so executors with skewed clocks still compare fairly.
import { readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type pg from 'pg';
import type { ExecutorBeat } from './lease-plan.ts';
import { isAlive } from '../../process/identity.ts';

/**
 * Where this process runs: the host name plus the PID namespace (Linux), so that two containers
 * sharing a host name never read each other's pids as their own.
 */
export const HOST_IDENTITY = ((): string => {
  try {
    return `${hostname()}/${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return hostname();
  }
})();

/**
 * A beat of an executor that ran on this host (same PID namespace) in a process that no longer
 * exists is as good as stale: its partitions are taken over at once, rather than after the
 * staleness limit (a lone executor restarted after a crash would otherwise decide nothing for
 * 3 heartbeat intervals, 30 s by default).
 */
export function withGoneLocalProcesses(beats: readonly (ExecutorBeat & { pid?: number | null; host?: string | null })[]): ExecutorBeat[] {
  return beats.map((b) => (b.host === HOST_IDENTITY && b.pid != null && b.pid !== process.pid && !isAlive(b.pid) ? { ...b, ageMs: Number.POSITIVE_INFINITY } : b));
}

export interface ExecutorBeats {
  beat(b: { executorId: string; draining: boolean; pid?: number; host?: string }): Promise<void>;
  list(): Promise<ExecutorBeat[]>;
  remove(executorId: string): Promise<void>;
}

/** `transport`: the work transport this executor publishes to, stated in every beat (waiting-reason.ts reads it). */
export function createExecutorBeats(pool: pg.Pool, transport?: string): ExecutorBeats {
  return {
    async beat(b) {
      await pool.query(
        `INSERT INTO baton_executor_liveness (executor_id, draining, pid, host, transport) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (executor_id) DO UPDATE SET draining = EXCLUDED.draining, transport = EXCLUDED.transport, heartbeat_at = now()`,
        [b.executorId, b.draining, b.pid ?? null, b.host ?? null, transport ?? null],
      );
    },
    async list() {
      const r = await pool.query<{ executor_id: string; draining: boolean; heartbeat_at: Date; age_ms: number; pid: number | null; host: string | null }>(
        `SELECT executor_id, draining, heartbeat_at, (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms, pid, host FROM baton_executor_liveness`,
      );
      return withGoneLocalProcesses(r.rows.map((x) => ({ executorId: x.executor_id, draining: x.draining, heartbeatAt: x.heartbeat_at, ageMs: x.age_ms, pid: x.pid, host: x.host })));
    },
    async remove(executorId) {
      await pool.query('DELETE FROM baton_executor_liveness WHERE executor_id = $1', [executorId]);
    },
  };
}
