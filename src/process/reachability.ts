// Whether a host can reach what it depends on, for its /healthz: the database (a `SELECT 1` every
// few seconds) and, when it uses one, the NATS connection (its status events, and a round trip to
// the server every few seconds). A host's own checks (a worker's heartbeats, the projector's lag)
// see their part late or not at all: an executor or an API whose database or NATS was gone
// answered 200 while every statement failed.
import type { NatsConnection } from 'nats';
import { Events } from 'nats';
import type pg from 'pg';

/** How often the database and NATS are asked. Often enough that a probe sees an outage within seconds, rare enough to cost nothing. */
export const DATABASE_PROBE_INTERVAL_MS = 5_000;
/** A probe that takes longer than this counts as failed: a server that does not answer is not reachable. */
const PROBE_TIMEOUT_MS = 5_000;
/**
 * Failed probes in a row before a server counts as unreachable: one alone may be a pool whose
 * connections were all busy for a moment (the probe queues behind the host's own statements).
 */
const FAILURES_TO_REPORT = 2;

export interface Reachability {
  /** What cannot be reached now, each with since when and why; empty when everything answers. */
  problems(): string[];
  stop(): void;
}

/** A question asked every interval; two failures in a row make a problem, one answer clears it. */
function probeLoop(ask: () => Promise<unknown>, describe: (since: string, why: string) => string, intervalMs: number, timeoutMs: number) {
  let problem: string | undefined;
  let since: string | undefined;
  let failures = 0;
  async function probe(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([ask(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)))]);
      problem = since = undefined;
      failures = 0;
    } catch (err) {
      since ??= new Date().toISOString();
      if (++failures >= FAILURES_TO_REPORT) problem = describe(since, (err as Error)?.message ?? String(err));
    } finally {
      clearTimeout(timer);
    }
  }
  let probing: Promise<void> | undefined;
  const interval = setInterval(() => {
    probing ??= probe().finally(() => (probing = undefined));
  }, intervalMs);
  interval.unref();
  return { problem: () => problem, stop: () => clearInterval(interval) };
}

export function watchReachability(o: { pool: Pick<pg.Pool, 'query'>; nc?: NatsConnection; intervalMs?: number; timeoutMs?: number }): Reachability {
  const intervalMs = o.intervalMs ?? DATABASE_PROBE_INTERVAL_MS;
  const timeoutMs = o.timeoutMs ?? PROBE_TIMEOUT_MS;
  const database = probeLoop(() => o.pool.query('SELECT 1'), (since, why) => `the database is unreachable since ${since}: ${why}`, intervalMs, timeoutMs);
  let natsStatus: string | undefined;
  let natsProbe: ReturnType<typeof probeLoop> | undefined;
  let stopped = false;

  if (o.nc) {
    const nc = o.nc;
    void (async () => {
      for await (const s of nc.status()) {
        if (stopped) return;
        if (s.type === Events.Disconnect) natsStatus ??= `NATS is disconnected since ${new Date().toISOString()} (reconnecting)`;
        else if (s.type === Events.Reconnect) natsStatus = undefined;
      }
    })().catch(() => undefined);
    void nc.closed().then(() => {
      if (!stopped) natsStatus = 'the NATS connection is closed';
    });
    // A connection whose server stopped answering (a stalled network path, a frozen server) stays
    // "connected" until the client's pings run out (src/transport/nats/connect.ts): a round trip
    // shows it within two probes.
    natsProbe = probeLoop(() => nc.rtt(), (since, why) => `NATS does not answer since ${since}: ${why}`, intervalMs, timeoutMs);
  }

  return {
    problems: () => [database.problem(), natsStatus ?? natsProbe?.problem()].filter((p): p is string => p !== undefined),
    stop() {
      stopped = true;
      database.stop();
      natsProbe?.stop();
    },
  };
}
