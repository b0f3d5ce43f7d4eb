// Waiting that a stop cuts short: every loop that pauses (retry backoff, a poll, a sweep) pauses
// with this, so stopping a host never waits for a timer to run out.
import { setTimeout as delay } from 'node:timers/promises';

/** The longest delay a Node timer holds (2^31 - 1 ms, ~24.8 days): a longer one fires at once, with a warning. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Resolves after `ms`, or at once when `signal` aborts (never rejects). The timer does not keep the process alive. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return;
  await delay(ms, undefined, { ref: false, ...(signal && { signal }) }).catch(() => undefined);
}
