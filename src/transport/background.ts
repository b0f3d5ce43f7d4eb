// What runs in the background of a WorkTransport instance, written once for both adapters: the
// set of consumers and subscriptions close() stops, and the periodic task (the dead-letter
// sweeps). Pauses use the one abortable sleep (src/async/sleep.ts).
import type { Logger } from 'pino';

export interface Stoppable {
  /** Idempotent: every call returns the one stop in progress (or done). */
  stop(): Promise<void>;
}

/** `stop` made idempotent: the first call runs it, every call returns that same promise. */
export function once(stop: () => Promise<void>): () => Promise<void> {
  let stopped: Promise<void> | undefined;
  return () => (stopped ??= stop());
}

/** The consumers (or subscriptions) one transport instance is running: each stops once; close() stops the rest. */
export class Running {
  readonly #all = new Set<Stoppable>();

  /** Track something that stops with `stop`; it leaves the set once stopped. */
  add(stop: () => Promise<void>): Stoppable {
    const handle: Stoppable = { stop: once(() => stop().finally(() => this.#all.delete(handle))) };
    this.#all.add(handle);
    return handle;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#all].map((s) => s.stop()));
  }
}

/**
 * Run `task` now, then again `everyMs` after each run ended (never two runs at once), until
 * stop(), which aborts the task's signal and waits for the run in progress. A run that fails is
 * logged with `failed` (the next one comes on time). The timer does not keep the process alive.
 */
export function repeatEvery(everyMs: number, task: (signal: AbortSignal) => Promise<unknown>, failed: string, log: Logger | undefined): Stoppable {
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let run: Promise<void> | undefined;
  const start = () => {
    timer = undefined;
    run = task(stopping.signal)
      .then(
        () => undefined,
        (err: unknown) => log?.warn({ err }, failed),
      )
      .finally(() => {
        run = undefined;
        if (stopping.signal.aborted) return;
        timer = setTimeout(start, everyMs);
        timer.unref();
      });
  };
  start();
  return {
    stop: once(async () => {
      stopping.abort();
      clearTimeout(timer);
      await run;
    }),
  };
}
