// Fixtures the parts of the WorkTransport contract share (work-transport.contract.ts runs them):
// the suite's options and timing constants, message and signal builders, and what records
// deliveries with bounded waits on them.
import { randomUUID } from 'node:crypto';
import type { Delivery, WorkerSignal, WorkMessage, WorkTransportOptions } from '../../src/transport/work-transport.ts';

export const ACK_WAIT_MS = 1_000;
export const MAX_DELIVER = 3;
export const OPTIONS: WorkTransportOptions = { ackWaitMs: ACK_WAIT_MS, maxDeliver: MAX_DELIVER };
/** Long enough for anything the transport was going to deliver to arrive. */
export const QUIET_WINDOW_MS = ACK_WAIT_MS + 500;

// Not src/async/sleep.ts: that one's timer does not keep the process alive (ref: false); this one's does.
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const newWorker = () => `w-${randomUUID().slice(0, 8)}`;

export function workMessage(workerId: string, over: Partial<WorkMessage> = {}): WorkMessage {
  return {
    messageId: randomUUID(),
    executionId: randomUUID(),
    workerId,
    runtime: 'node',
    action: 'test.noop',
    attempt: 1,
    handoffRevision: '2',
    publishedAt: new Date().toISOString(),
    ...over,
  };
}

export function workerSignal(over: Partial<WorkerSignal> = {}): WorkerSignal {
  return { kind: 'cancel', executionId: randomUUID(), attempt: 1, reason: 'cancelled by the contract test', ...over };
}

interface Seen {
  delivery: Delivery;
  /** performance.now() when the handler was called. */
  at: number;
  /** Which consumer got it (the label given to record()). */
  by: string;
}

/** What arrived in one test, with bounded waits on it. */
export class Observed<T> {
  readonly seen: T[] = [];
  #watchers = new Set<() => void>();

  protected record(item: T): void {
    this.seen.push(item);
    for (const w of [...this.#watchers]) w();
  }

  /** Resolve once `until` holds; fail after timeoutMs, saying what was awaited. */
  waitFor(what: string, until: () => boolean, timeoutMs = 5_000): Promise<void> {
    if (until()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#watchers.delete(check);
        reject(new Error(`waited ${timeoutMs} ms for ${what}; ${this.seen.length} seen`));
      }, timeoutMs);
      const check = () => {
        if (!until()) return;
        clearTimeout(timer);
        this.#watchers.delete(check);
        resolve();
      };
      this.#watchers.add(check);
    });
  }
}

/** Every delivery in one test. */
export class Recorder extends Observed<Seen> {
  /** A handler that records the delivery, then runs `then` (default: ack). */
  handler(by: string, then: (d: Delivery, s: Seen) => Promise<void> = (d) => d.ack()) {
    return async (delivery: Delivery) => {
      const s = { delivery, at: performance.now(), by };
      this.record(s);
      await then(delivery, s);
    };
  }

  of(messageId: string): Seen[] {
    return this.seen.filter((s) => s.delivery.message.messageId === messageId);
  }
}

/** Poll a value (depth is a metric, not an event) until it matches; bounded. */
export async function eventually<T>(what: string, read: () => Promise<T>, expected: T, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: T;
  for (let delayMs = 5; ; delayMs = Math.min(delayMs * 2, 100)) {
    last = await read();
    if (last === expected) return;
    if (performance.now() > deadline) throw new Error(`${what}: expected ${String(expected)}, still ${String(last)} after ${timeoutMs} ms`);
    await sleep(delayMs);
  }
}
