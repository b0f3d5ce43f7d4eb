// The pull loops both WorkTransport adapters run on. An adapter writes only the pull (a JetStream
// fetch, an SQL claim); the loops own what is the same for both: how many to ask for, when to ask
// again, the waits and the error back-off, how a delivery reaches the handler and is settled,
// and stopping.
//
// runPullLoop feeds a consumer: it keeps at most `concurrency` handlers running and never asks
// the source for more than the free slots (`running + requested <= concurrency`, where
// `requested` is what the open pulls may still hand over). Asking for more would start ack-wait
// clocks (or leases) on messages no handler has, and starve the other consumers of the same
// worker. When slots free up it pulls again; after a pull that found nothing more it waits for
// the source's wake-up or poll; after a failure it backs off. stop() stops pulling, lets the open
// pulls end (the source gives back what arrives after that) and waits for every handler that
// has a delivery.
//
// repeatPulls feeds a subscriber that handles what it pulls inside the pull, one pull after
// another (the dead-letter subscriptions), with the same waits and back-off.
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';
import { Backoff } from '../async/backoff.ts';
import { sleep } from '../async/sleep.ts';
import { once } from './background.ts';
import type { Delivery, WorkMessage } from './work-transport.ts';

/** What a loop does once a pull is over. */
export type PullEnd =
  /** Pull again as soon as there are free slots: a full batch (there may be more), or a long poll that ran its course. */
  | { next: 'pull' }
  /** Nothing more to pull now: pull again once `wait` resolves (on a wake-up, a deadline, or when the signal aborts). */
  | { next: 'wait'; wait: (signal: AbortSignal) => Promise<void> }
  /** Back off, then pull again: the pull failed (`err`, logged as a warning) or ended too soon to repeat at once (logged at debug). */
  | { next: 'back-off'; why: string; err?: unknown };

export const PULL_AGAIN: PullEnd = { next: 'pull' };

/** The adapter's side of one delivery; runDelivery guarantees at most one of ack/nak/term is called. */
export interface Settlement {
  ack(): Promise<void>;
  nak(delayMs: number): Promise<void>;
  term(): Promise<void>;
  working(): Promise<void>;
}

/** One message a source handed over: what the handler sees, and how the adapter settles it. */
export interface Pulled {
  message: WorkMessage;
  deliveryCount: number;
  settlement: Settlement;
}

export interface PullSource {
  /**
   * Ask for at most `max` messages and hand each to `take` as it arrives (a source may hold the
   * pull open: a JetStream fetch long-polls). Never more than `max`: a source gives any surplus
   * back itself. `take(undefined)` for one it disposed of itself (a poison message it
   * terminated), so its slot is free again. Once `signal` aborts (the consumer stops), end soon
   * and give back whatever arrives instead of taking it. May throw: that is a failed pull.
   */
  pull(max: number, take: (pulled: Pulled | undefined) => void, signal: AbortSignal): Promise<PullEnd>;
  /** Wait out a back-off; may end early when new work may be there. Default: sleep. */
  backOff?(ms: number, signal: AbortSignal): Promise<void>;
  /** True once no pull can ever succeed again (the connection was closed for good): pull no more. */
  ended?(): boolean;
}

export interface PullLoopOptions {
  concurrency: number;
  handler: (delivery: Delivery) => Promise<void>;
  log: Logger | undefined;
  /**
   * Open another pull while one is still open, once at least this many slots are free (or the
   * open pulls expect nothing more). Omitted: one pull at a time.
   */
  overlapAt?: number;
}

const logBackOff = (log: Logger | undefined, end: { why: string; err?: unknown }, retryInMs: number): void => {
  if (end.err === undefined) log?.debug({ retryInMs }, end.why);
  else log?.warn({ err: end.err, retryInMs }, end.why);
};

const failedPull = (err: unknown): PullEnd => ({ next: 'back-off', why: 'pull failed; retrying', err });

/** Feed `handler` from `source`, at most `concurrency` deliveries at a time, until stop(). */
export function runPullLoop(source: PullSource, o: PullLoopOptions): { stop(): Promise<void> } {
  const slots = new HandlerSlots();
  const stopping = new AbortController();
  const pulls = new Set<Promise<void>>();
  const backoff = new Backoff();
  const backOff = source.backOff ?? sleep;
  let requested = 0;
  /** A wait or back-off in progress: no pull starts until it is over. */
  let pause: Promise<void> | undefined;

  function pump(): void {
    if (stopping.signal.aborted || pause || source.ended?.()) return;
    const free = o.concurrency - slots.count - requested;
    if (free <= 0) return;
    if (pulls.size > 0 && (o.overlapAt === undefined || (requested > 0 && free < o.overlapAt))) return;
    startPull(free);
  }

  function startPull(n: number): void {
    requested += n;
    let taken = 0;
    const take = (pulled: Pulled | undefined) => {
      if (taken >= n) throw new BatonError(`pull source handed over more than the ${n} messages asked for`);
      taken++;
      requested--;
      if (pulled) slots.start(() => runDelivery(o.handler, pulled.message, pulled.deliveryCount, pulled.settlement, o.log));
      else queueMicrotask(pump);
    };
    const pull: Promise<void> = source
      .pull(n, take, stopping.signal)
      .catch(failedPull)
      .then((end) => {
        requested -= n - taken;
        pulls.delete(pull);
        after(end);
      });
    pulls.add(pull);
  }

  function after(end: PullEnd): void {
    if (stopping.signal.aborted) return;
    if (end.next === 'back-off') {
      logBackOff(o.log, end, backoff.nextMs);
      // Another pull is already backing off: this failure does not double the wait.
      if (!pause) {
        const ms = backoff.take();
        pauseUntil((signal) => backOff(ms, signal));
      }
      return;
    }
    backoff.reset();
    if (end.next === 'wait') pauseUntil(end.wait);
    else pump();
  }

  function pauseUntil(wait: (signal: AbortSignal) => Promise<void>): void {
    pause = wait(stopping.signal)
      .catch(() => undefined)
      .finally(() => {
        pause = undefined;
        pump();
      });
  }

  const offRelease = slots.onRelease(pump);
  pump();

  return {
    stop: once(async () => {
      stopping.abort();
      await pause;
      await Promise.all([...pulls]);
      await slots.drained();
      offRelease();
    }),
  };
}

/**
 * Pull until `signal` aborts, one pull after another, acting on each PullEnd as runPullLoop does.
 * For subscribers whose pull also handles what it got. Resolves once the pull in progress ended.
 */
export async function repeatPulls(
  pull: (signal: AbortSignal) => Promise<PullEnd>,
  o: { signal: AbortSignal; log: Logger | undefined; backOff?: (ms: number, signal: AbortSignal) => Promise<void> },
): Promise<void> {
  const backoff = new Backoff();
  const backOff = o.backOff ?? sleep;
  while (!o.signal.aborted) {
    const end = await pull(o.signal).catch(failedPull);
    if (o.signal.aborted) break;
    if (end.next === 'back-off') {
      const ms = backoff.take();
      logBackOff(o.log, end, ms);
      await backOff(ms, o.signal);
      continue;
    }
    backoff.reset();
    if (end.next === 'wait') await end.wait(o.signal);
  }
}

/**
 * How long a delivery whose handler threw waits before it comes again: 250 ms, 1 s, 4 s, then
 * 15 s. Such a throw is mostly the worker's database away for a moment (a restart, a failover, a
 * dropped connection); redelivered at once, the 5 deliveries of max-deliver were spent in a third
 * of a second and the execution was abandoned over a blip. This way they span 20 s, and the first
 * comes back soon.
 */
export const redeliveryDelayMs = (deliveryCount: number): number => Math.min(250 * 4 ** Math.max(0, deliveryCount - 1), 15_000);

/**
 * Run the handler on one delivery. Never rejects: a handler that throws, or returns without
 * settling, gets its delivery nak'ed (redelivered after redeliveryDelayMs, up to max-deliver), and
 * that is logged. Settling twice is a no-op, like JetStream's own messages.
 */
export async function runDelivery(
  handler: (delivery: Delivery) => Promise<void>,
  message: WorkMessage,
  deliveryCount: number,
  settlement: Settlement,
  log: Logger | undefined,
): Promise<void> {
  let settled = false;
  const once = (settle: () => Promise<void>) => (): Promise<void> => {
    if (settled) return Promise.resolve();
    settled = true;
    return settle();
  };
  const delivery: Delivery = {
    message,
    deliveryCount,
    ack: once(() => settlement.ack()),
    nak: (delayMs = 0) => {
      if (!Number.isFinite(delayMs) || delayMs < 0) return Promise.reject(new BatonError(`nak: delayMs must be a non-negative number of ms, got ${String(delayMs)}`));
      return once(() => settlement.nak(Math.round(delayMs)))();
    },
    term: once(() => settlement.term()),
    working: () => (settled ? Promise.resolve() : settlement.working()),
  };
  const about = { messageId: message.messageId, executionId: message.executionId, deliveryCount };
  let threw = false;
  try {
    await handler(delivery);
  } catch (err) {
    threw = true;
    if (settled) log?.warn({ err, ...about }, 'work handler threw after settling its delivery');
    else log?.warn({ err, ...about }, 'work handler threw; nak for redelivery');
  }
  if (settled) return;
  if (!threw) log?.warn(about, 'work handler returned without ack, nak or term; nak for redelivery');
  settled = true;
  try {
    await settlement.nak(redeliveryDelayMs(deliveryCount));
  } catch (err) {
    log?.warn({ err, ...about }, 'nak failed; the message is redelivered when its ack-wait runs out');
  }
}

/** The handlers a consumer is running: counts them, tells who waits when one finishes, drains. */
class HandlerSlots {
  readonly #running = new Set<Promise<void>>();
  readonly #listeners = new Set<() => void>();

  get count(): number {
    return this.#running.size;
  }

  start(task: () => Promise<void>): void {
    const p: Promise<void> = task()
      .catch(() => undefined)
      .finally(() => {
        this.#running.delete(p);
        for (const l of [...this.#listeners]) l();
      });
    this.#running.add(p);
  }

  /** Called after every handler finishes. Returns an unsubscribe function. */
  onRelease(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once no handler is running. */
  async drained(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }
}
