// Waiting for a server that is not ready yet: the database, and a host's NATS server the same
// way. A host started together with its Postgres (compose, a reboot, a failover) or beside a
// Postgres out of connection slots must wait for it, as it already rides out an outage once
// running, rather than exit and leave its work undone until something restarts it. Only
// conditions that pass by themselves are waited out; a wrong password, a database that does not
// exist or a host name that does not resolve fail at once, because waiting would not change them.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';

/** The first retry comes soon (a server finishing its startup), later ones back off to this. */
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 5_000;

// SQLSTATEs of conditions that pass by themselves.
const TRANSIENT_SQLSTATES: Record<string, string> = {
  '53300': 'too many connections', // sorry, too many clients already / too many connections for role
  '53000': 'the server is out of resources',
  '53100': 'the server is out of disk space',
  '53200': 'the server is out of memory',
  '57P01': 'the server is shutting down', // admin_shutdown
  '57P02': 'the server crashed and is restarting', // crash_shutdown
  '57P03': 'the server is starting up, shutting down or in recovery', // cannot_connect_now
  '08000': 'the connection failed',
  '08001': 'the connection failed',
  '08003': 'the connection failed',
  '08006': 'the connection failed',
  '40001': 'a concurrent migration conflicted', // serialization_failure
  '40P01': 'a concurrent migration conflicted', // deadlock_detected
  '55P03': 'a lock is held', // lock_not_available
};

const TRANSIENT_ERRNOS: Record<string, string> = {
  ECONNREFUSED: 'connection refused (is the server up yet?)',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  EAI_AGAIN: 'the host name could not be resolved right now',
  // nats.js's codes, for a host waiting for its NATS server as for its database.
  CONNECTION_REFUSED: 'connection refused (is the server up yet?)',
  TIMEOUT: 'the connection timed out',
};

/**
 * Why `err` is worth waiting out (a short phrase), or undefined when it is permanent: wrong
 * credentials (28P01, 28000), no such database (3D000), a host name that does not exist
 * (ENOTFOUND), a failed migration, or anything unknown. Follows `cause` chains.
 */
export function transientReason(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      const reason = TRANSIENT_SQLSTATES[code] ?? TRANSIENT_ERRNOS[code];
      if (reason) return reason;
    }
    if (typeof message === 'string') {
      // pg's own wording for a connection that timed out or died before any SQLSTATE was sent.
      if (/timeout exceeded when trying to connect|connection timeout|Connection terminated unexpectedly/i.test(message)) {
        return 'the connection timed out or was cut';
      }
    }
    // An AggregateError (several addresses for one host, all refused) holds the real ones.
    for (const inner of (e as { errors?: unknown[] }).errors ?? []) {
      const reason = transientReason(inner);
      if (reason) return reason;
    }
  }
  return undefined;
}

export interface WaitForServerOptions {
  /** Give up after this long: Infinity waits for good, 0 tries once. */
  waitMs: number;
  /** Where the waiting is logged (one warn line per new reason). */
  log: Logger;
  /** What is being waited for, for the log: `Postgres at postgres://…`. */
  what: string;
  /** How `waitMs` was set, for the log: `BATON_DB_WAIT=30s`. */
  setting: string;
  /** Stops the waiting (a stop signal while starting): the last error is thrown at once. */
  signal?: AbortSignal;
}

/**
 * Run `attempt` until it succeeds, retrying while it fails for a transient reason, with
 * backoff (100 ms doubling to 5 s, ±20 % jitter so hosts started together do not retry in
 * step) for at most `waitMs`. Throws a permanent error at once, and the last transient one
 * when the time is up.
 */
export async function waitForServer<T>(attempt: () => Promise<T>, o: WaitForServerOptions): Promise<T> {
  const started = performance.now();
  const logged = new Set<string>();
  let delay = FIRST_DELAY_MS;
  for (;;) {
    try {
      const result = await attempt();
      if (logged.size > 0) o.log.info({ waitedMs: Math.round(performance.now() - started) }, `${o.what} is available`);
      return result;
    } catch (err) {
      const reason = transientReason(err);
      const remaining = o.waitMs - (performance.now() - started);
      if (reason === undefined || remaining <= 0 || o.signal?.aborted) throw err;
      if (!logged.has(reason)) {
        logged.add(reason);
        o.log.warn(
          { reason, error: (err as Error).message, waitedMs: Math.round(performance.now() - started) },
          `waiting for ${o.what}: ${reason}; retrying with backoff (${o.setting})`,
        );
      }
      // The last try comes at the deadline, not a backoff step before it.
      const aborted = await sleep(Math.min(delay * (0.8 + Math.random() * 0.4), remaining), undefined, { signal: o.signal }).then(
        () => false,
        () => true,
      );
      if (aborted) throw err;
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}
