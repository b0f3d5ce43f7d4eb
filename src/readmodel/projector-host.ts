// The long-running projector (`baton projector`, and inside `baton dev`): one follower per
// projection, each resuming from its checkpoint; a projection whose version changed is rebuilt
// aside first; every minute a sample of executions is re-folded to catch drift. Errors (the
// database going away) are logged and retried with backoff; nothing is skipped meanwhile,
// because the checkpoint only moves with the rows.
import pg from 'pg';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { projections as allProjections, type Projection } from '../../projections/index.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { STALLED_SQL } from '../../projections/executions.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { readCheckpoint } from './checkpoints.ts';
import { sampleExecutionDrift } from './drift.ts';
import { followProjection } from './projector.ts';
import { rebuildProjection } from './rebuild.ts';
import { Backoff } from '../async/backoff.ts';

export interface ProjectorOptions {
  pool: pg.Pool;
  store: EventStore;
  log: Logger;
  registry?: Registry;
  projections?: readonly Projection[];
  batchSize?: number;
  /** How often to re-fold a sample of executions (ms); 0 turns it off. Default 60 s. */
  driftIntervalMs?: number;
  driftSampleSize?: number;
}

export interface Projector {
  stop(): Promise<void>;
  /** Problems for /healthz: projections whose follower is failing right now. */
  problems(): string[];
  /** Run a drift check now (also what the timer runs). */
  checkDrift(): Promise<void>;
}

function projectorMetrics(o: ProjectorOptions, list: readonly Projection[]) {
  const registers = o.registry ? [o.registry] : [];
  return {
    events: new Counter({ name: 'baton_projection_events_total', help: 'Events applied to the read model', labelNames: ['projection'], registers }),
    batches: new Counter({ name: 'baton_projection_batches_total', help: 'Batches committed with their checkpoint', labelNames: ['projection'], registers }),
    refused: new Counter({ name: 'baton_projection_refused_events_total', help: 'Stored events the machine refused while projecting', labelNames: ['projection'], registers }),
    driftChecks: new Counter({ name: 'baton_projection_drift_checks_total', help: 'Executions re-folded from their events to check their row', registers }),
    drift: new Counter({ name: 'baton_projection_drift_total', help: 'Re-folded executions whose row differed from their events', registers }),
    stalled: new Gauge({
      name: 'baton_executions_stalled',
      help: 'Running executions with no progress for longer than their stall limit (heartbeats are not progress)',
      registers,
      async collect() {
        try {
          const r = await o.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${pg.escapeIdentifier(readModelSchemaOf(o.pool))}.executions WHERE ${STALLED_SQL}`);
          this.set(Number(r.rows[0]!.n));
        } catch {
          // The database is away: keep the last value.
        }
      },
    }),
    lag: new Gauge({
      name: 'baton_projection_lag_seconds',
      help: 'Age of the oldest event a projection has not applied yet (0 when caught up)',
      labelNames: ['projection'],
      registers,
      async collect() {
        const now = Date.now();
        await Promise.all(
          list.map(async (p) => {
            try {
              const { position } = await readCheckpoint(o.pool, p.name);
              const [next] = await o.store.readAll({ after: position, limit: 1, streamPrefixes: [...p.streamPrefixes] });
              this.set({ projection: p.name }, next ? Math.max(0, (now - next.recordedAt.getTime()) / 1000) : 0);
            } catch {
              // The database is away: leave the last value rather than fail the whole scrape.
            }
          }),
        );
      },
    }),
  };
}

export function startProjector(o: ProjectorOptions): Projector {
  const list = o.projections ?? allProjections;
  const log = o.log;
  const metrics = projectorMetrics(o, list);
  const stopping = new AbortController();
  const failing = new Map<string, string>();

  async function run(p: Projection): Promise<void> {
    const backoff = new Backoff();
    while (!stopping.signal.aborted) {
      try {
        const checkpoint = await readCheckpoint(o.pool, p.name);
        if (checkpoint.version !== p.version) {
          log.info({ projection: p.name, from: checkpoint.version, to: p.version }, 'projection version changed: rebuilding aside');
          await rebuildProjection({ pool: o.pool, store: o.store, projection: p, log, batchSize: o.batchSize });
          continue;
        }
        const outcome = await followProjection({
          pool: o.pool,
          store: o.store,
          projection: p,
          from: checkpoint.position,
          signal: stopping.signal,
          log,
          batchSize: o.batchSize,
          hooks: {
            onBatch(_, events, result) {
              failing.delete(p.name);
              backoff.reset();
              metrics.events.inc({ projection: p.name }, events.length);
              metrics.batches.inc({ projection: p.name });
              if (result.refused.length > 0) metrics.refused.inc({ projection: p.name }, result.refused.length);
            },
          },
        });
        if (outcome === 'moved') log.info({ projection: p.name }, 'checkpoint moved by another writer; resuming from it');
      } catch (err) {
        if (stopping.signal.aborted) break;
        failing.set(p.name, (err as Error).message);
        log.error({ err, projection: p.name, retryInMs: backoff.nextMs }, 'projection follower failed; retrying');
        await backoff.wait(stopping.signal);
      }
    }
  }

  async function checkDrift(): Promise<void> {
    if (!list.some((p) => p.name === 'executions')) return;
    const sample = await sampleExecutionDrift({ pool: o.pool, store: o.store, sampleSize: o.driftSampleSize ?? 20 });
    metrics.driftChecks.inc(sample.checked);
    if (sample.drifted.length > 0) {
      metrics.drift.inc(sample.drifted.length);
      for (const d of sample.drifted) log.error({ executionId: d.executionId, fields: d.fields }, 'read model drift: row differs from its events');
    }
  }

  const running = list.map((p) => run(p));
  const driftEvery = o.driftIntervalMs ?? 60_000;
  const driftTimer =
    driftEvery > 0
      ? setInterval(() => {
          checkDrift().catch((err: unknown) => log.warn({ err }, 'drift check failed'));
        }, driftEvery)
      : undefined;
  driftTimer?.unref();

  return {
    async stop() {
      stopping.abort();
      if (driftTimer) clearInterval(driftTimer);
      await Promise.all(running);
    },
    problems: () => [...failing].map(([name, message]) => `projection ${name}: ${message}`),
    checkDrift,
  };
}
