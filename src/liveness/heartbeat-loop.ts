// A worker's heartbeat: its liveness row, refreshed every interval and pushed at once when
// something the executor schedules by changes (in-flight count, draining).
//
//   const loop = new HeartbeatLoop({ store, state: () => ({ workerId, …, inFlight: running.size, draining }) });
//   loop.start();
//   …  running.add(x); void loop.beatNow();
//   await loop.stop(); await store.remove(workerId);
import type { Logger } from 'pino';
import { silentLogger } from '../log.ts';
import { HEARTBEAT_INTERVAL_MS, type LivenessStore, type WorkerBeat } from './liveness-store.ts';

/**
 * Pushed beats closer together than this are merged into one. A busy worker's in-flight
 * count changes thousands of times a second at full load; one UPDATE per change would put
 * the liveness row on the hot path, while the executor needs the count only roughly current.
 */
export const MIN_BEAT_GAP_MS = 200;

export interface HeartbeatLoopOptions {
  store: Pick<LivenessStore, 'beat'>;
  /** The worker's state now; called once per beat. */
  state: () => WorkerBeat;
  /** Default HEARTBEAT_INTERVAL_MS (10 s). */
  intervalMs?: number;
  /** Default MIN_BEAT_GAP_MS. */
  minGapMs?: number;
  log?: Logger;
  /**
   * Called after each successful beat with the time since the previous successful one (null for
   * the first). A gap far past the interval means the process was paused or cut off long enough
   * for executors to have declared it lost. Must not throw.
   */
  afterBeat?: (sinceLastSuccessMs: number | null) => void;
}

export interface HeartbeatStatus {
  running: boolean;
  /** When the last beat succeeded (this process's clock), null before the first. */
  lastSuccessAt: Date | null;
  /** Beats failed in a row since the last success; /healthz can report it. */
  consecutiveFailures: number;
}

export class HeartbeatLoop {
  readonly #store: Pick<LivenessStore, 'beat'>;
  readonly #state: () => WorkerBeat;
  readonly #intervalMs: number;
  readonly #minGapMs: number;
  readonly #log: Logger;
  readonly #afterBeat: ((sinceLastSuccessMs: number | null) => void) | undefined;
  #running = false;
  /** Until a beat succeeds, every beat is this process's first (it resets started_at). */
  #starting = true;
  /** The next beat: periodic, or a pushed one waiting out the minimum gap. */
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | null = null;
  /** Callers of beatNow() waiting for the next beat to finish. */
  #waiters: (() => void)[] = [];
  #lastStart = -Infinity;
  #lastSuccessAt: Date | null = null;
  #failures = 0;

  constructor(options: HeartbeatLoopOptions) {
    this.#store = options.store;
    this.#state = options.state;
    this.#intervalMs = options.intervalMs ?? HEARTBEAT_INTERVAL_MS;
    this.#minGapMs = options.minGapMs ?? MIN_BEAT_GAP_MS;
    this.#log = options.log ?? silentLogger();
    this.#afterBeat = options.afterBeat;
    if (!(Number.isFinite(this.#intervalMs) && this.#intervalMs > 0)) {
      throw new RangeError(`HeartbeatLoop: intervalMs must be a positive number, got ${this.#intervalMs}`);
    }
    if (!(Number.isFinite(this.#minGapMs) && this.#minGapMs >= 0)) {
      throw new RangeError(`HeartbeatLoop: minGapMs must be a number >= 0, got ${this.#minGapMs}`);
    }
  }

  /** Beat now, then every intervalMs until stop(). Calling it again while running does nothing. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#starting = true;
    void this.beatNow();
  }

  /**
   * Ask for a beat as soon as possible (one already in flight, or one within minGapMs of the
   * last, delays it; requests meanwhile share it). Resolves when a beat that read the state
   * after this call has finished, whether it succeeded or not (failures are logged, never
   * thrown); at once when the loop is not running.
   */
  beatNow(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
      this.#kick();
    });
  }

  /** Stop beating; resolves once a beat in flight has finished. Does not remove the row. */
  async stop(): Promise<void> {
    this.#running = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inFlight;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }

  status(): HeartbeatStatus {
    return { running: this.#running, lastSuccessAt: this.#lastSuccessAt, consecutiveFailures: this.#failures };
  }

  #kick(): void {
    if (!this.#running || this.#inFlight) return; // a beat in flight: its end kicks again for the waiters
    const wait = this.#lastStart + this.#minGapMs - performance.now();
    if (wait > 0) {
      this.#arm(wait);
      return;
    }
    this.#fire();
  }

  #arm(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#waiters.length === 0) void this.beatNow();
      else this.#kick();
    }, ms);
    // The idle loop must not keep a process alive; a beat someone awaits (beatNow) must: a worker
    // host awaits its first beat while starting, and with nothing else pending Node exited (13)
    // from under `await startWorker(…)` of a worker without an executor.
    if (this.#waiters.length === 0) this.#timer.unref();
  }

  #fire(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const waiters = this.#waiters;
    this.#waiters = [];
    this.#lastStart = performance.now();
    this.#inFlight = this.#beatOnce().finally(() => {
      this.#inFlight = null;
      for (const resolve of waiters) resolve();
      if (!this.#running) return;
      if (this.#waiters.length > 0) this.#kick();
      else this.#arm(Math.max(0, this.#lastStart + this.#intervalMs - performance.now()));
    });
  }

  async #beatOnce(): Promise<void> {
    try {
      const starting = this.#starting;
      await this.#store.beat(this.#state(), { starting });
      if (starting) this.#starting = false;
      const previous = this.#lastSuccessAt;
      this.#lastSuccessAt = new Date();
      this.#failures = 0;
      this.#afterBeat?.(previous === null ? null : this.#lastSuccessAt.getTime() - previous.getTime());
    } catch (err) {
      this.#failures += 1;
      // The first failure is news; later ones repeat it, so only every 10th is logged at warn.
      const level = this.#failures === 1 || this.#failures % 10 === 0 ? 'warn' : 'debug';
      this.#log[level]({ err, consecutiveFailures: this.#failures }, 'heartbeat failed');
    }
  }
}
