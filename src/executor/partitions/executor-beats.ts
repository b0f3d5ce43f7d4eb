// Executor heartbeats in Postgres (table baton_executor_liveness, migration set `liveness`):
// what the lease planner reads to tell a live executor from a dead one. Ages use the
// database's clock, so executors with skewed clocks still compare fairly.
import type pg from 'pg';
import type { ExecutorBeat } from './lease-plan.ts';

export interface ExecutorBeats {
  beat(b: { executorId: string; draining: boolean; pid?: number; host?: string }): Promise<void>;
  list(): Promise<ExecutorBeat[]>;
  remove(executorId: string): Promise<void>;
}

export function createExecutorBeats(pool: pg.Pool): ExecutorBeats {
  return {
    async beat(b) {
      await pool.query(
        `INSERT INTO baton_executor_liveness (executor_id, draining, pid, host) VALUES ($1, $2, $3, $4)
         ON CONFLICT (executor_id) DO UPDATE SET draining = EXCLUDED.draining, heartbeat_at = now()`,
        [b.executorId, b.draining, b.pid ?? null, b.host ?? null],
      );
    },
    async list() {
      const r = await pool.query<{ executor_id: string; draining: boolean; heartbeat_at: Date; age_ms: number }>(
        `SELECT executor_id, draining, heartbeat_at, (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms FROM baton_executor_liveness`,
      );
      return r.rows.map((x) => ({ executorId: x.executor_id, draining: x.draining, heartbeatAt: x.heartbeat_at, ageMs: x.age_ms }));
    },
    async remove(executorId) {
      await pool.query('DELETE FROM baton_executor_liveness WHERE executor_id = $1', [executorId]);
    },
  };
}
