// The one retry policy for a host that lost the store (a restart, a failover, a terminated
// connection) or failed at an action it must repeat: wait 100 ms, doubling up to 5 s, and start
// over at 100 ms once something succeeds. 100 ms rides out a terminated connection at once; 5 s
// keeps a host that waits on a long outage to one attempt (and one log line) every few seconds.
import { sleep } from './sleep.ts';

export const FIRST_RETRY_MS = 100;
export const MAX_RETRY_MS = 5_000;

export class Backoff {
  #nextMs: number;

  constructor(
    private readonly firstMs = FIRST_RETRY_MS,
    private readonly maxMs = MAX_RETRY_MS,
  ) {
    this.#nextMs = firstMs;
  }

  /** How long the next wait will be. */
  get nextMs(): number {
    return this.#nextMs;
  }

  /** The delay to wait now; the next one doubles. For a caller that waits its own way. */
  take(): number {
    const ms = this.#nextMs;
    this.#nextMs = Math.min(ms * 2, this.maxMs);
    return ms;
  }

  /** Wait the current delay (cut short by `signal`), then double it for the next failure. */
  async wait(signal?: AbortSignal): Promise<void> {
    await sleep(this.take(), signal);
  }

  /** Something worked: the next failure waits the first delay again. */
  reset(): void {
    this.#nextMs = this.firstMs;
  }
}
