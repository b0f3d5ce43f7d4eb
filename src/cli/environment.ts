// The one composition root: what every process Baton runs is made of, whether a host (executor,
// worker, projector, API, dev) or a command that runs and ends. Config and logger come first;
// then the database (embedded unless BATON_DATABASE_URL is set; waited for as the caller's
// kind says), the event store (EventStoreDB when BATON_EVENTSTORE_URL is set, else Postgres) and
// the actor runtimes over it: executions, worker ids and workflows (src/runtime/). Hosts add
// their transport and liveness on top (hosts.ts).
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { openDatabase, type Database } from '../db/connect.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { createWorkerRuntime, type WorkerRuntime } from '../runtime/worker-kind.ts';
import { createWorkflowRuntime, type WorkflowRuntime } from '../workflow/workflow-stream.ts';
import { createScheduleRuntime, type ScheduleRuntime } from '../runtime/schedule-kind.ts';
import { openEventStore, type EventStoreKind } from './event-store.ts';

export interface Environment {
  config: Config;
  log: Logger;
  db: Database;
  store: EventStore;
  /** Which adapter `store` is (BATON_EVENTSTORE_URL set: eventstoredb). */
  storeKind: EventStoreKind;
  /** Executions on the actor runtime. */
  runtime: ExecutionRuntime;
  /** Worker ids' own streams. */
  workerStreams: WorkerRuntime;
  workflows: WorkflowRuntime;
  /** Schedules' own streams (src/schedule/). */
  schedules: ScheduleRuntime;
  /** Ends the event store, then the database (and an embedded Postgres this process owns). */
  close(): Promise<void>;
}

export interface OpenEnvironmentOptions {
  config: Config;
  log: Logger;
  /** A host waits for its database for good, a command 10 s (BATON_DB_WAIT overrides both). */
  as: 'host' | 'cli';
  /** Pool size; default pg's 10. */
  poolSize?: number;
  /** Shows in pg_stat_activity. */
  applicationName?: string;
  /** Stops waiting for the database (a stop signal while starting). */
  signal?: AbortSignal;
  /** The command only reads: an installation that does not exist is refused, not created (connect.ts). */
  readsOnly?: boolean;
}

export async function openEnvironment(o: OpenEnvironmentOptions): Promise<Environment> {
  const { config, log } = o;
  const db = await openDatabase(config, log, {
    ...(o.poolSize !== undefined && { max: o.poolSize }),
    ...(o.applicationName !== undefined && { applicationName: o.applicationName }),
    waitAs: o.as,
    ...(o.readsOnly && { readsOnly: true }),
    ...(o.signal && { signal: o.signal }),
  });
  // Hosts say which store they use; a command keeps its output for its result.
  const { store, kind } = await openEventStore(config, db.pool, log, o.as === 'host' ? 'info' : 'debug');
  return {
    config,
    log,
    db,
    store,
    storeKind: kind,
    runtime: createExecutionRuntime(store, { defaultMaxAttempts: config.timeouts.maxAttempts }),
    workerStreams: createWorkerRuntime(store),
    workflows: createWorkflowRuntime(store),
    schedules: createScheduleRuntime(store),
    async close() {
      try {
        await store.close();
      } finally {
        await db.close();
      }
    },
  };
}
