// What the executor host adds for retention: the gauge of events the store holds (always), and,
// when BATON_RETENTION is set, a run of runRetention every BATON_RETENTION_INTERVAL. Several
// executors may run: runRetention's advisory lock lets one of them run it at a time (the others
// skip that round), and a run is retry-safe anyway (retention.ts).
import type pg from 'pg';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RetentionConfig } from '../config.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { formatAge } from './age.ts';
import { RetentionBusyError, runRetention } from './retention.ts';

/** The gauge's count is refreshed at most this often: a scrape must not scan the store. */
const COUNT_EVERY_MS = 60_000;
/** The first run waits this long after start, so a restarting executor catches up first. */
const FIRST_RUN_AFTER_MS = 60_000;

/**
 * `baton_eventstore_events`: events the store holds (Postgres: the sum of every stream's length,
 * from baton_streams; left unset with EventStoreDB, which has no cheap count).
 */
export function storedEventsGauge(pool: pg.Pool, registry: Registry, postgresStore: boolean): void {
  if (registry.getSingleMetric('baton_eventstore_events')) return; // a second executor host in this process
  let counted: { at: number; value: number } | undefined;
  new Gauge({
    name: 'baton_eventstore_events',
    help: 'Events the event store holds (counted at most once a minute; falls when retention removes some)',
    registers: [registry],
    async collect() {
      if (!postgresStore) return;
      if (!counted || Date.now() - counted.at > COUNT_EVERY_MS) {
        const r = await pool.query<{ n: string | null }>('SELECT sum(revision + 1) AS n FROM baton_streams');
        counted = { at: Date.now(), value: Number(r.rows[0]!.n ?? 0) };
      }
      this.set(counted.value);
    },
  });
}

export interface RetentionSchedule {
  stop(): Promise<void>;
}

export function scheduleRetention(o: { pool: pg.Pool; store: EventStore; config: RetentionConfig; log: Logger; registry: Registry; firstRunAfterMs?: number }): RetentionSchedule {
  const counter = (name: string, help: string, labelNames: string[] = []) => (o.registry.getSingleMetric(name) as Counter | undefined) ?? new Counter({ name, help, labelNames, registers: [o.registry] });
  const archived = counter('baton_retention_archived_total', 'Executions archived and removed by retention (workflow steps included)');
  const removed = counter('baton_retention_events_removed_total', 'Events removed from the store by retention');
  // A failed run was only a log line: the dashboard and an alert need to see it.
  const runs = counter('baton_retention_runs_total', "This executor's retention runs by outcome: finished, failed (tried again next interval), skipped (another executor or `baton retention run` was running it)", ['outcome']);
  const stopping = new AbortController();
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;

  async function once(): Promise<void> {
    try {
      const s = await runRetention({ pool: o.pool, store: o.store, olderThanMs: o.config.olderThanMs, archiveDir: o.config.archiveDir, log: o.log, signal: stopping.signal });
      archived.inc(s.executions);
      removed.inc(s.events);
      runs.inc({ outcome: 'finished' });
      o.log.info({ executions: s.executions, workflows: s.workflows, events: s.events, skipped: s.skipped.length, ms: s.ms, archive: s.archiveDir }, 'retention: run finished');
    } catch (err) {
      if (!(err instanceof RetentionBusyError)) throw err;
      runs.inc({ outcome: 'skipped' });
      o.log.debug('retention: another executor (or `baton retention run`) is running it');
    }
  }

  function next(delayMs: number): void {
    timer = setTimeout(() => {
      running = once()
        .catch((err: unknown) => {
          runs.inc({ outcome: 'failed' });
          o.log.error({ err }, 'retention: run failed; trying again next interval');
        })
        .finally(() => {
          running = undefined;
          if (!stopping.signal.aborted) next(o.config.intervalMs);
        });
    }, delayMs);
    timer.unref();
  }

  o.log.info({ olderThan: formatAge(o.config.olderThanMs), every: formatAge(o.config.intervalMs), archive: o.config.archiveDir }, 'retention scheduled (BATON_RETENTION)');
  next(o.firstRunAfterMs ?? FIRST_RUN_AFTER_MS);
  return {
    async stop() {
      stopping.abort();
      clearTimeout(timer);
      await running;
    },
  };
}
