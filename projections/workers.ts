// The `workers` projection: each worker's lifecycle (its worker-<id> stream) and the outcomes
// it appended to execution streams. Pure fold; liveness (heartbeats, in-flight) is joined at
// read time from baton_worker_liveness and the executions table, because it is not history.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX } from '../schemas/events.ts';
import { WORKER_STREAM_PREFIX, workerIdOfStream } from '../schemas/worker-events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import type { BatchResult, Projection } from './projection.ts';
import { fromColumns, qualified, selectRowsByKeys, snakeCase, upsertRows } from './rows.ts';

export type WorkerStatus = 'active' | 'draining' | 'stopped' | 'lost' | 'unknown';

export interface WorkerRow {
  workerId: string;
  /** Last worker-stream revision folded in; -1 before any. */
  revision: number;
  status: WorkerStatus;
  actions: string[];
  runtimes: string[];
  capacity: number | null;
  host: string | null;
  pid: number | null;
  startedAt: string | null;
  /** Global position of its latest WorkerStarted: the latest one to offer an action says its policy. */
  startedPosition: number | null;
  /** Per action, the policy (retry, timeouts, concurrency) its latest WorkerStarted advertised. */
  policies: Record<string, unknown>;
  statusReason: string | null;
  statusChangedAt: string | null;
  started: number;
  completed: number;
  failed: number;
  timedOut: number;
  cancelled: number;
  released: number;
}

export const emptyWorker = (workerId: string): WorkerRow => ({
  workerId,
  revision: -1,
  status: 'unknown',
  actions: [],
  runtimes: [],
  capacity: null,
  host: null,
  pid: null,
  startedAt: null,
  startedPosition: null,
  policies: {},
  statusReason: null,
  statusChangedAt: null,
  started: 0,
  completed: 0,
  failed: 0,
  timedOut: 0,
  cancelled: 0,
  released: 0,
});

/** Execution event type → the counter it bumps on the worker that appended it. */
const outcomeCounters: Record<string, keyof WorkerRow> = {
  ExecutionStarted: 'started',
  ExecutionCompleted: 'completed',
  ExecutionFailed: 'failed',
  ExecutionTimedOut: 'timedOut',
  ExecutionCancelled: 'cancelled',
  OwnershipReleased: 'released',
};

/** The worker an event is about: its stream's, or the appending worker of an execution event. */
export function workerIdOfEvent(e: StoredEvent): string | undefined {
  const fromStream = workerIdOfStream(e.streamId);
  if (fromStream !== undefined) return fromStream;
  const by = e.metadata['by'];
  if (!e.streamId.startsWith(EXECUTION_STREAM_PREFIX) || typeof by !== 'string' || !by.startsWith('worker:')) return undefined;
  return outcomeCounters[e.type] ? by.slice('worker:'.length) : undefined;
}

const occurred = (e: StoredEvent) => {
  const t = e.metadata['occurredAt'];
  return typeof t === 'string' ? new Date(t).toISOString() : e.recordedAt.toISOString();
};

/**
 * Fold one event into a worker's row. Worker-stream events at or below the row's revision
 * are replays and change nothing. Execution events carry no worker revision, so their
 * counters rely on the projector applying each event once (checkpoint in the same transaction).
 */
export function foldWorkerRow(row: WorkerRow | undefined, e: StoredEvent): WorkerRow | undefined {
  const workerId = workerIdOfEvent(e);
  if (workerId === undefined) return row;
  const current = row ?? emptyWorker(workerId);
  if (workerIdOfStream(e.streamId) === undefined) {
    const counter = outcomeCounters[e.type]!;
    return { ...current, [counter]: (current[counter] as number) + 1 };
  }
  const revision = Number(e.revision);
  if (revision <= current.revision) return current;
  const data = e.data as Record<string, unknown>;
  const at = occurred(e);
  const moved = (status: WorkerStatus, reason: string | null): WorkerRow => ({ ...current, revision, status, statusReason: reason, statusChangedAt: at });
  switch (e.type) {
    case 'WorkerStarted':
      return {
        ...moved('active', null),
        actions: data['actions'] as string[],
        runtimes: data['runtimes'] as string[],
        capacity: data['capacity'] as number,
        host: (data['host'] as string | undefined) ?? null,
        pid: (data['pid'] as number | undefined) ?? null,
        startedAt: at,
        startedPosition: Number(e.globalPosition),
        policies: (data['policies'] as Record<string, unknown> | undefined) ?? {},
      };
    case 'WorkerDraining':
      return moved('draining', data['reason'] as string);
    case 'WorkerStopped':
      return moved('stopped', data['reason'] as string);
    case 'WorkerLost':
      return moved('lost', data['reason'] as string);
    default:
      return { ...current, revision };
  }
}

const COLUMNS = Object.keys(emptyWorker('x')).map(snakeCase);
const BIGINTS = ['revision', 'started_position', 'started', 'completed', 'failed', 'timed_out', 'cancelled', 'released'];
export const workerRowFromDb = (r: Record<string, unknown>) => fromColumns<WorkerRow>(r, BIGINTS);

export const workersProjection: Projection = {
  name: 'workers',
  version: 2, // 2: policies and started_position
  streamPrefixes: [WORKER_STREAM_PREFIX, EXECUTION_STREAM_PREFIX],
  tables: [{ name: 'workers', key: ['worker_id'] }],
  ddl: new URL('./workers.sql', import.meta.url),
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[]): Promise<BatchResult> {
    const table = qualified(schema, 'workers');
    const ids = [...new Set(events.map(workerIdOfEvent).filter((id) => id !== undefined))];
    if (ids.length === 0) return { changedExecutions: [], refused: [] };
    const rows = new Map<string, WorkerRow>((await selectRowsByKeys(client, table, 'worker_id', 'text', ids)).map((row) => [row['worker_id'] as string, workerRowFromDb(row)]));
    for (const e of events) {
      const id = workerIdOfEvent(e);
      if (id === undefined) continue;
      const next = foldWorkerRow(rows.get(id), e);
      if (next) rows.set(id, next);
    }
    await upsertRows(client, table, ['worker_id'], COLUMNS, [...rows.values()]);
    return { changedExecutions: [], refused: [] };
  },
};
