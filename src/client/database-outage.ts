// What a database-mode client call makes of a database outage (a restart, a failover, a cut
// connection): a wait for an execution rides it out with the hosts' backoff (src/async/backoff.ts)
// until its timeout or signal; a one-shot call fails at once, but with DatabaseUnavailableError
// rather than node-postgres's raw error. Only conditions that pass by themselves count
// (transientReason): any other error is the caller's or a bug, and passes through unchanged.
import { Backoff } from '../async/backoff.ts';
import { DatabaseUnavailableError } from '../db/database-unavailable.ts';
import { transientReason } from '../db/wait.ts';
import { BatonError } from '../errors.ts';

/** `err` as DatabaseUnavailableError when it is an outage; unchanged otherwise. `where`: the URL, redacted. */
export function typedOutage(err: unknown, where: string): unknown {
  if (err instanceof BatonError) return err;
  const reason = transientReason(err);
  if (!reason) return err;
  return new DatabaseUnavailableError(`lost Postgres at ${where} (${reason}): ${(err as Error).message}`, { cause: err });
}

/** One attempt; an outage rejects with DatabaseUnavailableError. */
export async function once<T>(where: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw typedOutage(err, where);
  }
}

export const STOPPED = Symbol('stopped');

/** Retries `call` through an outage until `signal` aborts (then STOPPED); other errors reject at once. */
export async function throughOutage<T>(where: string, signal: AbortSignal, call: () => Promise<T>): Promise<T | typeof STOPPED> {
  const backoff = new Backoff();
  for (;;) {
    if (signal.aborted) return STOPPED;
    try {
      return await call();
    } catch (err) {
      const typed = typedOutage(err, where);
      if (!(typed instanceof DatabaseUnavailableError)) throw typed;
      await backoff.wait(signal);
    }
  }
}
