// Worker liveness in Postgres (table baton_worker_liveness, migration set `liveness`).
// Workers upsert their row on every heartbeat; the executor asks which live workers can
// take an action. Every time comparison uses the database's clock, never the caller's.
import type pg from 'pg';
import { z } from 'zod';
import { WorkerId } from '../../schemas/events.ts';
import { parseOrThrow } from '../errors.ts';
import { NAMESPACE_RULE, namespaceProblem } from '../input/namespace.ts';

/** How often a worker beats by default. */
export const HEARTBEAT_INTERVAL_MS = 10_000;
/** A worker is stale after this many missed intervals: one late beat is noise, three are an outage. */
export const STALE_AFTER_INTERVALS = 3;
/** The staleness limit that goes with an interval: 30 s for the default 10 s. */
export const staleAfterMs = (intervalMs: number = HEARTBEAT_INTERVAL_MS) => intervalMs * STALE_AFTER_INTERVALS;

/** What a worker reports in each heartbeat. */
export interface WorkerBeat {
  workerId: string;
  actions: string[];
  runtimes: string[];
  capacity: number;
  /** Executions it is running (or holding) right now. */
  inFlight: number;
  draining: boolean;
  /** The namespaces whose executions it runs; absent: every namespace. */
  namespaces?: string[];
  /** The work transport it pulls from; absent: not said. */
  transport?: 'nats' | 'postgres';
  pid?: number;
  host?: string;
}

const WorkerBeat = z.object({
  workerId: WorkerId,
  actions: z.array(z.string().min(1)),
  runtimes: z.array(z.string().min(1)),
  capacity: z.number().int().min(1),
  inFlight: z.number().int().min(0),
  draining: z.boolean(),
  namespaces: z.array(z.string().refine((n) => namespaceProblem(n) === undefined, { message: NAMESPACE_RULE })).optional(),
  transport: z.enum(['nats', 'postgres']).optional(),
  pid: z.number().int().positive().optional(),
  host: z.string().min(1).optional(),
});

export interface BeatOptions {
  /** The process's first beat: started_at becomes now. Otherwise started_at keeps its value. */
  starting?: boolean;
}

export interface WorkerLiveness extends Omit<WorkerBeat, 'pid' | 'host' | 'namespaces' | 'transport'> {
  /** null: every namespace. */
  namespaces: string[] | null;
  /** null: not said (a worker from before the column). */
  transport: string | null;
  pid: number | null;
  host: string | null;
  heartbeatAt: Date;
  startedAt: Date;
  /** now() − heartbeat_at by the database's clock, in ms. */
  ageMs: number;
}

/** How many live workers (heartbeat within the staleness limit) offer an action. */
export interface ActionOffer {
  /** Taking work: not draining. */
  ready: number;
  draining: number;
  /** Of the ready ones, those that run every namespace's executions. */
  readyEverywhere: number;
  /** The namespaces the other ready ones run (`--namespaces`), each once. */
  readyNamespaces: string[];
  /**
   * Workers that would be ready but pull from a transport no live executor publishes to: they
   * never see the work (and are not counted above). Absent when there are none.
   */
  otherTransport?: { workers: number; theirs: string[]; executors: string[] };
}

/** claim()'s answer: the id is ours now, or a live process holds it. */
export type WorkerIdClaim = { claimed: true } | { claimed: false; holder: WorkerLiveness };

export interface ClaimOptions {
  /** A row whose heartbeat is older than this is a dead worker's: its id is free. */
  staleAfterMs: number;
  /**
   * Whether the row's process is known to be gone though its heartbeat is fresh: on this
   * host, its pid is dead or is our own (a container restarted with the same pid).
   */
  holderIsGone: (holder: WorkerLiveness) => boolean;
}

export interface LivenessStore {
  /** Upsert the worker's row with heartbeat_at = now(). Throws InvalidEventError for a malformed beat. */
  beat(worker: WorkerBeat, options?: BeatOptions): Promise<void>;
  /**
   * Take `worker.workerId` for this process before announcing it: write its row (draining, so
   * no work is scheduled to it until its first real beat) unless a live process holds the id.
   * Atomic against a concurrent claim of the same id: one of them wins.
   */
  claim(worker: WorkerBeat, options: ClaimOptions): Promise<WorkerIdClaim>;
  /** Delete the worker's row (clean shutdown); false when there was none. */
  remove(workerId: string): Promise<boolean>;
  /** Make the worker's row stale at once (its process is known to be gone), so no work is placed on it and what it held is reclaimed. */
  expire(workerId: string): Promise<void>;
  /** Every row, stale ones included, by worker id. */
  list(): Promise<WorkerLiveness[]>;
  /**
   * Workers that can take `action` now: heartbeat within `staleAfterMs`, not draining,
   * offering the action, in_flight < capacity; least loaded first (in_flight/capacity,
   * then in_flight, then worker id).
   */
  candidates(action: string, staleAfterMs: number): Promise<WorkerLiveness[]>;
  /**
   * Per action asked for, the live workers that offer it (an action nobody offers is absent).
   * `name@N` asks for the workers offering version N: for N = 1 that includes those listing the
   * bare name and no version (src/input/action-versions.ts).
   */
  offering(actions: readonly string[], staleAfterMs: number): Promise<Map<string, ActionOffer>>;
}

interface Row {
  worker_id: string;
  actions: string[];
  runtimes: string[];
  capacity: number;
  in_flight: number;
  draining: boolean;
  namespaces: string[] | null;
  transport: string | null;
  heartbeat_at: Date;
  started_at: Date;
  pid: number | null;
  host: string | null;
  age_ms: number;
}

// namespaces and transport only as the row's current process said them (migration liveness/0003).
const SAID = (column: string, row = '') => `CASE WHEN ${row}said_by_pid IS NOT DISTINCT FROM ${row}pid THEN ${row}${column} END`;
const COLUMNS = `worker_id, actions, runtimes, capacity, in_flight, draining, ${SAID('namespaces')} AS namespaces, ${SAID('transport')} AS transport, heartbeat_at, started_at, pid, host,
  (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms`;

const toLiveness = (r: Row): WorkerLiveness => ({
  workerId: r.worker_id,
  actions: r.actions,
  runtimes: r.runtimes,
  capacity: r.capacity,
  inFlight: r.in_flight,
  draining: r.draining,
  namespaces: r.namespaces,
  transport: r.transport,
  heartbeatAt: r.heartbeat_at,
  startedAt: r.started_at,
  pid: r.pid,
  host: r.host,
  ageMs: r.age_ms,
});

function checkStaleAfter(what: string, staleAfterMs: number): void {
  if (!(Number.isFinite(staleAfterMs) && staleAfterMs > 0)) {
    throw new RangeError(`${what}(): staleAfterMs must be a positive number of milliseconds, got ${staleAfterMs}`);
  }
}

export function createLivenessStore(pool: pg.Pool): LivenessStore {
  return {
    async beat(worker, options = {}) {
      const w = parseOrThrow(WorkerBeat, worker, 'heartbeat');
      await pool.query(
        `INSERT INTO baton_worker_liveness
           (worker_id, actions, runtimes, capacity, in_flight, draining, heartbeat_at, started_at, pid, host, namespaces, transport, said_by_pid)
         VALUES ($1, $2, $3, $4, $5, $6, now(), now(), $7, $8, $10, $11, $7)
         ON CONFLICT (worker_id) DO UPDATE SET
           actions = EXCLUDED.actions, runtimes = EXCLUDED.runtimes, capacity = EXCLUDED.capacity,
           in_flight = EXCLUDED.in_flight, draining = EXCLUDED.draining, heartbeat_at = now(),
           started_at = CASE WHEN $9 THEN now() ELSE baton_worker_liveness.started_at END,
           pid = EXCLUDED.pid, host = EXCLUDED.host, namespaces = EXCLUDED.namespaces, transport = EXCLUDED.transport, said_by_pid = EXCLUDED.pid`,
        [w.workerId, w.actions, w.runtimes, w.capacity, w.inFlight, w.draining, w.pid ?? null, w.host ?? null, options.starting === true, w.namespaces ?? null, w.transport ?? null],
      );
    },

    async claim(worker, options) {
      const w = parseOrThrow(WorkerBeat, worker, 'heartbeat');
      const values = [w.workerId, w.actions, w.runtimes, w.capacity, w.pid ?? null, w.host ?? null, w.namespaces ?? null, w.transport ?? null];
      for (;;) {
        // xmin: the row version, which every write changes.
        const { rows } = await pool.query<Row & { version: string }>(
          `SELECT ${COLUMNS}, xmin::text AS version FROM baton_worker_liveness WHERE worker_id = $1`,
          [w.workerId],
        );
        const current = rows[0] && toLiveness(rows[0]);
        if (current && current.ageMs < options.staleAfterMs && !options.holderIsGone(current)) return { claimed: false, holder: current };
        // Written only if the row is still the one judged above (or still absent): a process
        // claiming the same id meanwhile changed it, and then we look again.
        const r = current
          ? await pool.query(
              `UPDATE baton_worker_liveness SET actions = $2, runtimes = $3, capacity = $4, in_flight = 0, draining = true,
                 heartbeat_at = now(), started_at = now(), pid = $5, host = $6, namespaces = $7, transport = $8, said_by_pid = $5
               WHERE worker_id = $1 AND xmin::text = $9`,
              [...values, rows[0]!.version],
            )
          : await pool.query(
              `INSERT INTO baton_worker_liveness (worker_id, actions, runtimes, capacity, in_flight, draining, pid, host, namespaces, transport, said_by_pid)
               VALUES ($1, $2, $3, $4, 0, true, $5, $6, $7, $8, $5) ON CONFLICT (worker_id) DO NOTHING`,
              values,
            );
        if (r.rowCount === 1) return { claimed: true };
      }
    },

    async expire(workerId) {
      await pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - interval '1 day' WHERE worker_id = $1`, [workerId]);
    },

    async remove(workerId) {
      const { rowCount } = await pool.query('DELETE FROM baton_worker_liveness WHERE worker_id = $1', [workerId]);
      return (rowCount ?? 0) > 0;
    },

    async list() {
      const { rows } = await pool.query<Row>(
        `SELECT ${COLUMNS} FROM baton_worker_liveness ORDER BY worker_id COLLATE "C"`,
      );
      return rows.map(toLiveness);
    },

    async offering(actions, staleAfterMs) {
      checkStaleAfter('offering', staleAfterMs);
      if (actions.length === 0) return new Map();
      // A worker listing a bare name and no `name@…` offers version 1 of it: asked only when a version is.
      const names = actions.some((a) => a.includes('@'))
        ? `(SELECT x FROM unnest(l.actions) x
             UNION SELECT x || '@1' FROM unnest(l.actions) x
              WHERE strpos(x, '@') = 0 AND NOT EXISTS (SELECT 1 FROM unnest(l.actions) y WHERE starts_with(y, x || '@')))`
        : 'unnest(l.actions)';
      // Namespace names hold no ',' (NAMESPACE_PATTERN): joined, the ready workers' lists fit one text.
      // A worker reaches the executors when either side does not say its transport (an earlier
      // build), or one live executor publishes to the transport it pulls from (worker-directory.ts
      // reachableOver, the executor's own rule).
      const { rows } = await pool.query<{ action: string; ready: number; draining: number; ready_everywhere: number; ready_namespaces: string | null; unreached: number; unreached_transports: string[] | null; executor_transports: string[] | null }>(
        `WITH executors AS (
           SELECT array_agg(DISTINCT transport ORDER BY transport) FILTER (WHERE transport IS NOT NULL) AS transports
             FROM baton_executor_liveness WHERE heartbeat_at > now() - $2::float8 * interval '1 millisecond'),
         live AS (
           SELECT l.*, ${SAID('namespaces', 'l.')} AS said_namespaces,
                  (${SAID('transport', 'l.')} IS NULL OR e.transports IS NULL OR ${SAID('transport', 'l.')} = ANY (e.transports)) AS reached,
                  ${SAID('transport', 'l.')} AS said_transport, e.transports AS executor_transports
             FROM baton_worker_liveness l CROSS JOIN executors e
            WHERE l.heartbeat_at > now() - $2::float8 * interval '1 millisecond')
         SELECT a.action, count(*) FILTER (WHERE NOT l.draining AND l.reached)::int AS ready, count(*) FILTER (WHERE l.draining)::int AS draining,
                count(*) FILTER (WHERE NOT l.draining AND l.reached AND l.said_namespaces IS NULL)::int AS ready_everywhere,
                string_agg(array_to_string(l.said_namespaces, ','), ',') FILTER (WHERE NOT l.draining AND l.reached) AS ready_namespaces,
                count(*) FILTER (WHERE NOT l.draining AND NOT l.reached)::int AS unreached,
                array_agg(DISTINCT l.said_transport) FILTER (WHERE NOT l.draining AND NOT l.reached) AS unreached_transports,
                min(l.executor_transports) AS executor_transports
           FROM live l CROSS JOIN LATERAL ${names} AS a(action)
          WHERE a.action = ANY($1::text[])
          GROUP BY a.action`,
        [actions, staleAfterMs],
      );
      return new Map(
        rows.map((r) => [
          r.action,
          {
            ready: r.ready,
            draining: r.draining,
            readyEverywhere: r.ready_everywhere,
            readyNamespaces: [...new Set(r.ready_namespaces ? r.ready_namespaces.split(',') : [])].sort(),
            ...(r.unreached > 0 && { otherTransport: { workers: r.unreached, theirs: r.unreached_transports ?? [], executors: r.executor_transports ?? [] } }),
          },
        ]),
      );
    },

    async candidates(action, staleAfterMs) {
      checkStaleAfter('candidates', staleAfterMs);
      // COLLATE "C": the tie-break must not depend on the server's locale.
      const { rows } = await pool.query<Row>(
        `SELECT ${COLUMNS} FROM baton_worker_liveness
          WHERE $1 = ANY (actions)
            AND NOT draining
            AND in_flight < capacity
            AND heartbeat_at > now() - $2::float8 * interval '1 millisecond'
          ORDER BY in_flight::float8 / capacity, in_flight, worker_id COLLATE "C"`,
        [action, staleAfterMs],
      );
      return rows.map(toLiveness);
    },
  };
}
