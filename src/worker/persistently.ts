// A worker's appends that must not be lost to a blip: an outcome, a release.
import type { Logger } from 'pino';
import { RejectedCommandError } from '../errors.ts';

/** Retry a transient failure (not a refusal) a few times: an outcome must not be lost to a blip. */
export async function persistently<T>(what: string, log: Logger, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof RejectedCommandError || attempt >= 10) throw err;
      log.warn({ err, attempt }, `${what} failed; retrying`);
      await new Promise((r) => setTimeout(r, Math.min(2_000, 50 * 2 ** attempt)));
    }
  }
}

