// Whether a host can reach what it depends on, for its /healthz: the database (a `SELECT 1` every
// few seconds) and, when it uses one, the NATS connection (its status events). A host's own checks
// (a worker's heartbeats, the projector's lag) see their part late or not at all: an executor or
// an API whose database or NATS was gone answered 200 while every statement failed.
import type { NatsConnection } from 'nats';
import { Events } from 'nats';
import type pg from 'pg';

/** How often the database is asked. Often enough that a probe sees an outage within seconds, rare enough to cost nothing. */
export const DATABASE_PROBE_INTERVAL_MS = 5_000;
/** A probe that takes longer than this counts as failed: a database that does not answer is not reachable. */
const PROBE_TIMEOUT_MS = 5_000;
/**
 * Failed probes in a row before the database counts as unreachable: one alone may be a pool whose
 * connections were all busy for a moment (the probe queues behind the host's own statements).
 */
const FAILURES_TO_REPORT = 2;

export interface Reachability {
  /** What cannot be reached now, each with since when and why; empty when everything answers. */
  problems(): string[];
  stop(): void;
}

export function watchReachability(o: { pool: Pick<pg.Pool, 'query'>; nc?: NatsConnection; intervalMs?: number }): Reachability {
  let database: string | undefined;
  let nats: string | undefined;
  let databaseSince: string | undefined;
  let failures = 0;
  let stopped = false;

  async function probe(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        o.pool.query('SELECT 1'),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS))),
      ]);
      database = undefined;
      databaseSince = undefined;
      failures = 0;
    } catch (err) {
      databaseSince ??= new Date().toISOString();
      if (++failures >= FAILURES_TO_REPORT) database = `the database is unreachable since ${databaseSince}: ${(err as Error)?.message ?? String(err)}`;
    } finally {
      clearTimeout(timer);
    }
  }
  let probing: Promise<void> | undefined;
  const interval = setInterval(() => {
    probing ??= probe().finally(() => (probing = undefined));
  }, o.intervalMs ?? DATABASE_PROBE_INTERVAL_MS);
  interval.unref();

  if (o.nc) {
    const nc = o.nc;
    void (async () => {
      for await (const s of nc.status()) {
        if (stopped) return;
        if (s.type === Events.Disconnect) nats ??= `NATS is disconnected since ${new Date().toISOString()} (reconnecting)`;
        else if (s.type === Events.Reconnect) nats = undefined;
      }
    })().catch(() => undefined);
    void nc.closed().then(() => {
      if (!stopped) nats = 'the NATS connection is closed';
    });
  }

  return {
    problems: () => [database, nats].filter((p): p is string => p !== undefined),
    stop() {
      stopped = true;
      clearInterval(interval);
    },
  };
}
