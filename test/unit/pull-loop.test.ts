// The pull loops both work transports run on (src/transport/pull-loop.ts) and the background
// helpers beside them (src/transport/background.ts), against an in-memory source: flow control,
// stop semantics, redelivery of what a handler threw on, the waits and the back-off. The
// adapters' own behaviour on the real NATS and Postgres is the contract suite's
// (test/contract/work-transport.*.test.ts).
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { sleep } from '../../src/async/sleep.ts';
import { repeatEvery } from '../../src/transport/background.ts';
import { PULL_AGAIN, redeliveryDelayMs, repeatPulls, runPullLoop, type PullEnd, type Pulled, type PullSource } from '../../src/transport/pull-loop.ts';
import type { Delivery, WorkMessage } from '../../src/transport/work-transport.ts';
import { until } from '../support/until.ts';

const message = (): WorkMessage => ({
  messageId: randomUUID(),
  executionId: randomUUID(),
  workerId: 'w-1',
  runtime: 'node',
  action: 'test.noop',
  attempt: 1,
  handoffRevision: '2',
  publishedAt: new Date().toISOString(),
});

/** Settle calls per message id, in order: `ack`, `nak:<ms>`, `term`. */
class Settlements {
  readonly calls = new Map<string, string[]>();
  for(m: WorkMessage): Pulled['settlement'] {
    const log = (what: string) => async () => {
      this.calls.set(m.messageId, [...(this.calls.get(m.messageId) ?? []), what]);
    };
    return { ack: log('ack'), term: log('term'), working: log('working'), nak: (ms) => log(`nak:${ms}`)() };
  }
  of(m: WorkMessage): string[] {
    return this.calls.get(m.messageId) ?? [];
  }
}

/**
 * A queue in memory, pulled like the Postgres claim: a pull takes what is there at once and, when
 * it got fewer than it asked for, waits for `push` (or the signal). Records every pull's `max`.
 */
class MemorySource implements PullSource {
  readonly queue: WorkMessage[] = [];
  readonly asked: number[] = [];
  readonly settlements = new Settlements();
  pullsAfterAbort = 0;
  #wake: (() => void) | undefined;

  push(...ms: WorkMessage[]): void {
    this.queue.push(...ms);
    this.#wake?.();
  }

  async pull(max: number, take: (p: Pulled | undefined) => void, signal: AbortSignal): Promise<PullEnd> {
    if (signal.aborted) this.pullsAfterAbort++;
    this.asked.push(max);
    await Promise.resolve(); // a round trip
    const got = this.queue.splice(0, max);
    for (const m of got) take({ message: m, deliveryCount: 1, settlement: this.settlements.for(m) });
    if (got.length === max) return PULL_AGAIN;
    return {
      next: 'wait',
      wait: (s) =>
        new Promise<void>((resolve) => {
          const done = () => {
            this.#wake = undefined;
            s.removeEventListener('abort', done);
            resolve();
          };
          this.#wake = done;
          s.addEventListener('abort', done, { once: true });
        }),
    };
  }
}

/** Resolve once `check` holds; fail after `ms` naming what was awaited. */

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

function logLines(): { log: pino.Logger; lines: { level: number; msg: string; retryInMs?: number }[] } {
  const lines: { level: number; msg: string; retryInMs?: number }[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (c: Buffer, _e, done) => (lines.push(JSON.parse(c.toString())), done()) }));
  return { log, lines };
}

describe('runPullLoop', () => {
  it('never runs more than `concurrency` handlers, never asks for more than the free slots, and delivers everything', async () => {
    const source = new MemorySource();
    const all = Array.from({ length: 40 }, message);
    source.push(...all);
    let running = 0;
    let peak = 0;
    const handled: string[] = [];
    const loop = runPullLoop(source, {
      concurrency: 4,
      log: undefined,
      handler: async (d) => {
        peak = Math.max(peak, ++running);
        await new Promise((r) => setTimeout(r, 1));
        running--;
        handled.push(d.message.messageId);
        await d.ack();
      },
    });
    await until('40 handled', () => handled.length === 40);
    await loop.stop();
    expect(peak).toBe(4);
    expect(Math.max(...source.asked)).toBeLessThanOrEqual(4);
    expect(new Set(handled)).toEqual(new Set(all.map((m) => m.messageId)));
    expect(all.every((m) => source.settlements.of(m).join() === 'ack')).toBe(true);
  });

  it('pulls one at a time unless told to overlap; with overlapAt it opens another pull for enough free slots', async () => {
    // Pulls that stay open until ended (or the loop stops), like JetStream long polls; the first
    // hands over `firstHandsOver(max)` messages at once.
    const open: { max: number; end: () => void }[] = [];
    const settlements = new Settlements();
    const longPolls = (firstHandsOver: (max: number) => number): PullSource => ({
      pull: (max, take, signal) =>
        new Promise<PullEnd>((resolve) => {
          const end = () => resolve(PULL_AGAIN);
          open.push({ max, end });
          signal.addEventListener('abort', end, { once: true });
          if (open.length > 1) return;
          for (let i = 0; i < firstHandsOver(max); i++) {
            const m = message();
            take({ message: m, deliveryCount: 1, settlement: settlements.for(m) });
          }
        }),
    });
    /** Handlers after the first `quick` wait for `hold`. */
    const holding = (quick: number, hold: Promise<void>) => {
      let started = 0;
      return async (d: Delivery) => {
        if (started++ >= quick) await hold;
        await d.ack();
      };
    };

    const single = runPullLoop(longPolls(() => 0), { concurrency: 8, log: undefined, handler: async (d) => d.ack() });
    await until('the first pull', () => open.length === 1);
    expect(open[0]!.max).toBe(8);
    open[0]!.end(); // ended: the next may start
    await until('the second pull', () => open.length === 2);
    await single.stop();
    expect(open.length).toBe(2); // none started by stop()

    // The first pull hands over 6 of its 8 and stays open (2 still requested): a second opens
    // only once 2 slots (overlapAt) are free, not at the first free one.
    open.length = 0;
    const release = gate();
    const overlapping = runPullLoop(longPolls(() => 6), { concurrency: 8, overlapAt: 2, log: undefined, handler: holding(2, release.promise) });
    await until('a second, overlapping pull', () => open.length === 2);
    expect(open.map((p) => p.max)).toEqual([8, 2]);
    release.open();
    await overlapping.stop();
    expect(open.length).toBe(2);

    // A pull still open that got all it asked for expects nothing more: one free slot is enough.
    open.length = 0;
    const holdRest = gate();
    const filled = runPullLoop(longPolls((max) => max), { concurrency: 8, overlapAt: 2, log: undefined, handler: holding(1, holdRest.promise) });
    await until('a pull for the one free slot', () => open.length === 2);
    expect(open.map((p) => p.max)).toEqual([8, 1]);
    holdRest.open();
    await filled.stop();
  });

  it('stop() ends the open pull, waits for every handler that has a delivery, and pulls no more', async () => {
    const source = new MemorySource();
    const [a, b] = [message(), message()];
    source.push(a, b);
    const holds = [gate(), gate()];
    const started: string[] = [];
    const finished: string[] = [];
    const loop = runPullLoop(source, {
      concurrency: 2,
      log: undefined,
      handler: async (d) => {
        const i = started.push(d.message.messageId) - 1;
        await holds[i]!.promise;
        await d.ack();
        finished.push(d.message.messageId);
      },
    });
    await until('both handlers running', () => started.length === 2);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    holds[0]!.open();
    await until('the first handler done', () => finished.length === 1);
    await new Promise((r) => setTimeout(r, 50)); // a window: stop() must still wait for the second
    expect(stopped).toBe(false);
    holds[1]!.open();
    await stopping;
    expect(finished.length).toBe(2);
    source.push(message()); // after stop: nobody takes it
    await new Promise((r) => setTimeout(r, 20));
    expect(source.queue.length).toBe(1);
    expect(source.pullsAfterAbort).toBe(0);
    expect(loop.stop()).toBe(loop.stop()); // idempotent: the one stop
  });

  it('naks what a handler threw on or returned from unsettled after a back-off that grows with its deliveries, and settles each delivery at most once', async () => {
    const source = new MemorySource();
    const [throws, forgets, twice] = [message(), message(), message()];
    source.push(throws, forgets, twice);
    const { log, lines } = logLines();
    const loop = runPullLoop(source, {
      concurrency: 3,
      log,
      handler: async (d: Delivery) => {
        if (d.message === throws) throw new Error('handler failed (expected by the test)');
        if (d.message === twice) {
          await d.ack();
          await d.nak(100);
          await d.term();
        }
      },
    });
    await until('all three settled', () => [throws, forgets, twice].every((m) => source.settlements.of(m).length > 0));
    await loop.stop();
    expect(source.settlements.of(throws)).toEqual(['nak:250']);
    expect(source.settlements.of(forgets)).toEqual(['nak:250']);
    expect([1, 2, 3, 4, 5, 9].map(redeliveryDelayMs)).toEqual([250, 1_000, 4_000, 15_000, 15_000, 15_000]);
    expect(source.settlements.of(twice)).toEqual(['ack']);
    expect(lines.map((l) => l.msg).sort()).toEqual(['work handler returned without ack, nak or term; nak for redelivery', 'work handler threw; nak for redelivery']);
  });

  it('does not pull while waiting for a wake-up, even when slots free up; pulls again once woken', async () => {
    const source = new MemorySource();
    const first = message();
    source.push(first);
    const handled: string[] = [];
    const loop = runPullLoop(source, { concurrency: 4, log: undefined, handler: async (d) => (handled.push(d.message.messageId), d.ack()) });
    await until('the first delivery', () => handled.length === 1);
    await new Promise((r) => setTimeout(r, 20)); // its slot is free again, the source has nothing
    expect(source.asked).toEqual([4]); // one pull: it got fewer than asked and waits
    const second = message();
    source.push(second); // the wake-up
    await until('the second delivery', () => handled.length === 2);
    await loop.stop();
    expect(source.asked).toEqual([4, 4]);
  });

  it('backs off after a failed pull, 100 ms doubling, logged as a warning, and from 100 ms again after a pull that worked', async () => {
    const { log, lines } = logLines();
    const waits: number[] = [];
    let failures = 3;
    const source: PullSource = {
      backOff: async (ms) => {
        waits.push(ms);
      },
      async pull(_max, _take, signal) {
        if (failures > 0) {
          failures--;
          return { next: 'back-off', why: 'claim failed; retrying', err: new Error('down (expected by the test)') };
        }
        if (waits.length === 3) {
          failures = 1;
          return PULL_AGAIN;
        }
        return { next: 'wait', wait: () => sleep(60_000, signal) };
      },
    };
    const loop = runPullLoop(source, { concurrency: 1, log, handler: async (d) => d.ack() });
    await until('four back-offs', () => waits.length === 4);
    await loop.stop();
    expect(waits).toEqual([100, 200, 400, 100]);
    expect(lines.filter((l) => l.msg === 'claim failed; retrying').map((l) => [l.level, l.retryInMs])).toEqual([
      [40, 100],
      [40, 200],
      [40, 400],
      [40, 100],
    ]);
  });
});

describe('repeatPulls', () => {
  it('pulls until stopped, backs off on failure (at debug without an error), and waits when told', async () => {
    const { log, lines } = logLines();
    const stopping = new AbortController();
    const ends: PullEnd[] = [
      { next: 'back-off', why: 'fetch ended early; backing off' },
      { next: 'back-off', why: 'fetch failed; retrying', err: new Error('expected by the test') },
      PULL_AGAIN,
      { next: 'back-off', why: 'fetch failed; retrying', err: new Error('expected by the test') },
    ];
    let pulls = 0;
    const waits: number[] = [];
    const loop = repeatPulls(
      async (signal) => {
        pulls++;
        return ends.shift() ?? { next: 'wait', wait: () => sleep(60_000, signal) };
      },
      { signal: stopping.signal, log, backOff: async (ms) => void waits.push(ms) },
    );
    await until('the waiting pull', () => pulls === 5);
    stopping.abort();
    await loop;
    expect(waits).toEqual([100, 200, 100]);
    expect(lines.map((l) => [l.level, l.msg, l.retryInMs])).toEqual([
      [20, 'fetch ended early; backing off', 100],
      [40, 'fetch failed; retrying', 200],
      [40, 'fetch failed; retrying', 100],
    ]);
  });
});

describe('repeatEvery', () => {
  it('runs at once, then every period after the run ended, never two at once; stop() aborts and waits for the run in progress', async () => {
    let running = 0;
    let overlapped = false;
    let runs = 0;
    let lastSignal: AbortSignal | undefined;
    const hold = gate();
    const sweeps = repeatEvery(
      5,
      async (signal) => {
        overlapped ||= running > 0;
        running++;
        runs++;
        lastSignal = signal;
        if (runs === 3) await hold.promise; // a slow run: the timer must not start another meanwhile
        running--;
      },
      'sweep failed',
      undefined,
    );
    expect(runs).toBe(1); // at once
    await until('the third run', () => runs === 3);
    await new Promise((r) => setTimeout(r, 30));
    expect(runs).toBe(3);
    let stopped = false;
    const stopping = sweeps.stop().then(() => (stopped = true));
    expect(lastSignal?.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(stopped).toBe(false); // waits for the run in progress
    hold.open();
    await stopping;
    await new Promise((r) => setTimeout(r, 20));
    expect(runs).toBe(3); // and none after
    expect(overlapped).toBe(false);
  });

  it('logs a failed run and keeps its schedule', async () => {
    const { log, lines } = logLines();
    let runs = 0;
    const sweeps = repeatEvery(
      5,
      async () => {
        if (++runs === 1) throw new Error('expected by the test');
      },
      'sweep failed; trying again at the next one',
      log,
    );
    await until('a run after the failure', () => runs >= 2);
    await sweeps.stop();
    expect(lines.map((l) => [l.level, l.msg])).toEqual([[40, 'sweep failed; trying again at the next one']]);
  });
});
