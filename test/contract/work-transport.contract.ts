// The WorkTransport contract: every adapter runs this suite unchanged.
//
// Timing: the suite runs with a 1 s ack-wait and max-deliver 3, so redelivery cases finish in
// about a second. Every wait is bounded (waitFor's timeout names what was missing). The only
// fixed waits are the windows that show something does NOT happen (no redelivery after an ack,
// none after max-deliver) and the lower bound of a nak delay; each says so where it sits.
//
// Dead letters: one suite-wide queue per harness, shared by every test, so each test looks only
// at its own messages (by messageId) in lists and in what onDeadLetter hands over.
//
// Signals: every test rings fresh worker ids, so it sees only its own signals. Absence is shown
// with a sentinel: a signal sent after the one that must not arrive, awaited where it must
// arrive; both adapters deliver one sender's signals to one listener in order.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InvalidEventError, NotFoundError } from '../../src/errors.ts';
import type {
  Consumer,
  DeadLetter,
  DeadLetterSubscription,
  Delivery,
  SignalSubscription,
  WorkerSignal,
  WorkMessage,
  WorkTransport,
  WorkTransportOptions,
} from '../../src/transport/work-transport.ts';
import { until } from '../support/until.ts';

export interface WorkTransportHarness {
  /**
   * A new transport instance over the same queue: as far as the adapter can tell, another process
   * (its own pool / listener). The harness closes every instance it opened in close().
   */
  open(options: WorkTransportOptions): Promise<WorkTransport>;
  /** Put `payload` on the wire where `workerId`'s signals travel, bypassing sendSignal's checks. */
  sendRawSignal(workerId: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

const ACK_WAIT_MS = 1_000;
const MAX_DELIVER = 3;
const OPTIONS: WorkTransportOptions = { ackWaitMs: ACK_WAIT_MS, maxDeliver: MAX_DELIVER };
/** Long enough for anything the transport was going to deliver to arrive. */
const QUIET_WINDOW_MS = ACK_WAIT_MS + 500;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const newWorker = () => `w-${randomUUID().slice(0, 8)}`;

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

interface Seen {
  delivery: Delivery;
  /** performance.now() when the handler was called. */
  at: number;
  /** Which consumer got it (the label given to record()). */
  by: string;
}

/** What arrived in one test, with bounded waits on it. */
class Observed<T> {
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
class Recorder extends Observed<Seen> {
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

export function workerSignal(over: Partial<WorkerSignal> = {}): WorkerSignal {
  return { kind: 'cancel', executionId: randomUUID(), attempt: 1, reason: 'cancelled by the contract test', ...over };
}

/** Every signal received in one test, with the label of the subscription that got it. */
class Inbox extends Observed<{ by: string; signal: WorkerSignal }> {
  handler(by: string) {
    return (signal: WorkerSignal) => this.record({ by, signal });
  }

  /** The signals `by` received, oldest first. */
  of(by: string): WorkerSignal[] {
    return this.seen.filter((s) => s.by === by).map((s) => s.signal);
  }

  /** Resolve once `by` has received a signal for `executionId`. */
  waitForSignal(by: string, executionId: string, timeoutMs = 5_000): Promise<void> {
    return this.waitFor(`${by} to receive the signal for ${executionId}`, () => this.of(by).some((s) => s.executionId === executionId), timeoutMs);
  }
}

/** Poll a value (depth is a metric, not an event) until it matches; bounded. */
async function eventually<T>(what: string, read: () => Promise<T>, expected: T, timeoutMs = 5_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last: T;
  for (let delayMs = 5; ; delayMs = Math.min(delayMs * 2, 100)) {
    last = await read();
    if (last === expected) return;
    if (performance.now() > deadline) throw new Error(`${what}: expected ${String(expected)}, still ${String(last)} after ${timeoutMs} ms`);
    await sleep(delayMs);
  }
}

/** Every dead letter in the transport, paging through listDeadLetters `pageSize` at a time. */
async function allDeadLetters(t: WorkTransport, pageSize = 50): Promise<DeadLetter[]> {
  const all: DeadLetter[] = [];
  for (let after: string | undefined; ; ) {
    const page = await t.listDeadLetters({ limit: pageSize, ...(after !== undefined && { after }) });
    all.push(...page);
    if (page.length < pageSize) return all;
    after = page.at(-1)!.cursor;
  }
}

/** Resolve once `check` holds (polled); fail after timeoutMs naming what was awaited. */

/** A promise the test resolves by hand (to hold a handler open). */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

export function workTransportContract(name: string, makeHarness: () => Promise<WorkTransportHarness>) {
  describe(`WorkTransport contract: ${name}`, () => {
    let h: WorkTransportHarness;
    let transport: WorkTransport;
    let started: (Consumer | DeadLetterSubscription | SignalSubscription)[] = [];
    let gates: { open: () => void }[] = [];

    beforeAll(async () => {
      h = await makeHarness();
      transport = await h.open(OPTIONS);
    });
    afterAll(async () => {
      await h?.close();
    });
    // No test may leave a consumer running: stop them all, and fail if one will not stop.
    afterEach(async () => {
      for (const g of gates) g.open();
      const stopping = Promise.all(started.map((c) => c.stop()));
      started = [];
      gates = [];
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        stopping,
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('a consumer did not stop within 5 s after the test: a handler never returned')), 5_000);
        }),
      ]).finally(() => clearTimeout(timer));
    });

    const consume = async (t: WorkTransport, workerId: string, handler: (d: Delivery) => Promise<void>, concurrency = 2) => {
      const c = await t.consume(workerId, handler, { concurrency });
      started.push(c);
      return c;
    };
    /** onDeadLetter, stopped after the test like the consumers. */
    const subscribe = async (t: WorkTransport, handler: (d: DeadLetter) => Promise<void>) => {
      const s = await t.onDeadLetter(handler);
      started.push(s);
      return s;
    };
    const held = () => {
      const g = gate();
      gates.push(g);
      return g;
    };
    /** onSignal, stopped after the test like the consumers. */
    const listen = async (t: WorkTransport, workerId: string, handler: (s: WorkerSignal) => void) => {
      const s = await t.onSignal(workerId, handler);
      started.push(s);
      return s;
    };

    it('delivers a message once, intact, to its worker and not to another worker', async () => {
      const [a, b] = [newWorker(), newWorker()];
      const rec = new Recorder();
      await consume(transport, a, rec.handler('a'));
      await consume(transport, b, rec.handler('b'));
      const forA = workMessage(a);
      const forB = workMessage(b, { runtime: 'python', attempt: 2 });
      await transport.publish([forA, forB]);
      await rec.waitFor('one delivery at each worker', () => rec.seen.length >= 2);
      expect(rec.of(forA.messageId).map((s) => [s.by, s.delivery.deliveryCount])).toEqual([['a', 1]]);
      expect(rec.of(forB.messageId).map((s) => [s.by, s.delivery.deliveryCount])).toEqual([['b', 1]]);
      expect(rec.of(forA.messageId)[0]!.delivery.message).toEqual(forA);
      expect(rec.of(forB.messageId)[0]!.delivery.message).toEqual(forB);
      await eventually(`depth(${a})`, () => transport.depth(a), 0);
    });

    it('counts messages not yet acked in depth, per worker', async () => {
      const w = newWorker();
      await transport.publish([workMessage(w), workMessage(w), workMessage(w)]);
      expect(await transport.depth(w)).toBe(3);
      expect(await transport.depth(newWorker())).toBe(0);
      expect(await transport.depth()).toBeGreaterThanOrEqual(3);
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w'));
      await rec.waitFor('3 deliveries', () => rec.seen.length === 3);
      await eventually(`depth(${w}) after acks`, () => transport.depth(w), 0);
    });

    it('does not redeliver an acked message', async () => {
      const w = newWorker();
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w'));
      const m = workMessage(w);
      await transport.publish([m]);
      await rec.waitFor('the delivery', () => rec.of(m.messageId).length === 1);
      await sleep(QUIET_WINDOW_MS); // a window to show that nothing more arrives, past the ack-wait
      expect(rec.of(m.messageId).length).toBe(1);
      expect(await transport.depth(w)).toBe(0);
    });

    it('redelivers a nak(delayMs) no sooner than the delay, with deliveryCount 2', async () => {
      const w = newWorker();
      const delayMs = 500;
      const rec = new Recorder();
      let nakAt = 0;
      await consume(
        transport,
        w,
        rec.handler('w', async (d) => {
          if (d.deliveryCount === 1) {
            nakAt = performance.now();
            await d.nak(delayMs);
          } else await d.ack();
        }),
      );
      const m = workMessage(w);
      await transport.publish([m]);
      await rec.waitFor('the redelivery after nak', () => rec.of(m.messageId).length === 2, delayMs + 3_000);
      const [first, second] = rec.of(m.messageId);
      expect([first!.delivery.deliveryCount, second!.delivery.deliveryCount]).toEqual([1, 2]);
      const waited = second!.at - nakAt;
      console.log(`[${name}] nak(${delayMs}) redelivered after ${waited.toFixed(1)} ms`);
      expect(waited).toBeGreaterThanOrEqual(delayMs - 5); // the delay starts when the nak arrives, after nakAt; 5 ms for clocks
      // Pushed, not found by a slow poll: the consumer slept until the message was due.
      expect(waited).toBeLessThan(delayMs + 1_000);
    });

    it('redelivers a message neither acked nor nak’ed once its ack-wait runs out', async () => {
      const w = newWorker();
      const rec = new Recorder();
      const hold = held();
      await consume(
        transport,
        w,
        rec.handler('w', async (d) => {
          if (d.deliveryCount === 1) await hold.promise; // stuck: never settles in time
          else await d.ack();
        }),
      );
      const m = workMessage(w);
      await transport.publish([m]);
      await rec.waitFor('the redelivery after ack-wait', () => rec.of(m.messageId).length === 2, ACK_WAIT_MS + 4_000);
      const [first, second] = rec.of(m.messageId);
      expect(second!.delivery.deliveryCount).toBe(2);
      const waited = second!.at - first!.at;
      console.log(`[${name}] unsettled message redelivered after ${waited.toFixed(1)} ms (ack-wait ${ACK_WAIT_MS} ms)`);
      // The lease starts when the transport hands the message out, a round trip before the
      // handler runs, so allow a little under the ack-wait; the point is "not before it".
      expect(waited).toBeGreaterThanOrEqual(ACK_WAIT_MS - 50);
      hold.open(); // the stale first delivery now returns unsettled; its auto-nak must not revive the acked message
      await eventually(`depth(${w})`, () => transport.depth(w), 0);
    });

    it('postpones redelivery while the handler calls working()', async () => {
      const w = newWorker();
      const rec = new Recorder();
      await consume(
        transport,
        w,
        rec.handler('w', async (d) => {
          // Work for 2.5 ack-waits, reporting progress every 0.3.
          for (let elapsed = 0; elapsed < ACK_WAIT_MS * 2.5; elapsed += 300) {
            await sleep(300);
            await d.working();
          }
          await d.ack();
        }),
      );
      const m = workMessage(w);
      await transport.publish([m]);
      await rec.waitFor('the delivery', () => rec.of(m.messageId).length === 1);
      const t0 = performance.now();
      await eventually(`depth(${w}) after the long handler acked`, () => transport.depth(w), 0, ACK_WAIT_MS * 2.5 + 5_000);
      expect(performance.now() - t0).toBeGreaterThan(ACK_WAIT_MS * 2); // it really worked past two ack-waits
      expect(rec.of(m.messageId).length).toBe(1); // and was never redelivered meanwhile (concurrency 2 left a slot free)
    });

    it(`stops delivering a message after maxDeliver (${MAX_DELIVER}) deliveries`, async () => {
      const w = newWorker();
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w', (d) => d.nak()));
      const m = workMessage(w);
      await transport.publish([m]);
      await rec.waitFor(`${MAX_DELIVER} deliveries`, () => rec.of(m.messageId).length === MAX_DELIVER);
      await sleep(QUIET_WINDOW_MS); // a window to show that no further delivery comes, past the ack-wait
      expect(rec.of(m.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2, 3]);
      await eventually(`depth(${w}) without the exhausted message`, () => transport.depth(w), 0);
    });

    // Max-deliver 3 and a 1 s ack-wait: a nak'ed message dies at once, an unsettled one after
    // three ack-waits; onDeadLetter and the lists see it within a few seconds more.
    const DEAD_WITHIN_MS = ACK_WAIT_MS * MAX_DELIVER + 5_000;
    const REASON = `not acknowledged after ${MAX_DELIVER} deliveries`;

    it(`makes a message nak'ed on each of its ${MAX_DELIVER} deliveries a dead letter: handed to onDeadLetter, listed and shown`, async () => {
      const w = newWorker();
      const handed: DeadLetter[] = [];
      await subscribe(transport, async (d) => {
        handed.push(d);
      });
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w', (d) => d.nak()));
      const m = workMessage(w);
      const before = Date.now();
      await transport.publish([m]);
      await until('onDeadLetter to get the dead letter', () => handed.some((d) => d.messageId === m.messageId), DEAD_WITHIN_MS);
      expect(rec.of(m.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2, 3]);
      const dead = handed.find((d) => d.messageId === m.messageId)!;
      expect(dead).toMatchObject({ messageId: m.messageId, message: m, workerId: w, deliveries: MAX_DELIVER, reason: REASON });
      expect(Date.parse(dead.deadLetteredAt)).toBeGreaterThanOrEqual(before - 1_000);
      expect(Date.parse(dead.deadLetteredAt)).toBeLessThanOrEqual(Date.now() + 1_000);
      expect(await transport.getDeadLetter(m.messageId)).toEqual(dead);
      expect(await transport.getDeadLetter(m.messageId.toUpperCase())).toEqual(dead);
      expect(await transport.getDeadLetter(randomUUID())).toBeUndefined();
      // Listed once, whatever the page size; pages follow each other without repeats.
      const listed = await allDeadLetters(transport, 2);
      expect(listed.filter((d) => d.messageId === m.messageId)).toEqual([dead]);
      expect(new Set(listed.map((d) => d.cursor)).size).toBe(listed.length);
      expect((await allDeadLetters(transport, 1000)).map((d) => d.cursor)).toEqual(listed.map((d) => d.cursor));
      // Out of the work queue: not waiting for anyone, never delivered again.
      await eventually(`depth(${w})`, () => transport.depth(w), 0);
      expect(rec.of(m.messageId).length).toBe(MAX_DELIVER);
    });

    it('makes a message whose last ack-wait ran out a dead letter', async () => {
      const w = newWorker();
      const rec = new Recorder();
      const hold = held();
      // Concurrency 4: the three stuck deliveries hold three slots, and the consumer keeps pulling.
      await consume(transport, w, rec.handler('w', () => hold.promise), 4);
      const m = workMessage(w);
      await transport.publish([m]);
      await until('the dead letter', async () => (await transport.getDeadLetter(m.messageId)) !== undefined, DEAD_WITHIN_MS);
      expect(rec.of(m.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2, 3]);
      expect(await transport.getDeadLetter(m.messageId)).toMatchObject({ message: m, workerId: w, deliveries: MAX_DELIVER, reason: REASON });
      await eventually(`depth(${w})`, () => transport.depth(w), 0);
      hold.open(); // the stale deliveries return unsettled: their auto-naks must not bring it back
      await sleep(200);
      expect(await transport.getDeadLetter(m.messageId)).toBeDefined();
      expect(await transport.depth(w)).toBe(0);
    });

    it('retryDeadLetter delivers the message again from delivery 1; deleteDeadLetter removes one for good', async () => {
      const w = newWorker();
      const rec = new Recorder();
      let failing = true;
      await consume(transport, w, rec.handler('w', (d) => (failing ? d.nak() : d.ack())));
      const [retried, deleted] = [workMessage(w), workMessage(w)];
      await transport.publish([retried, deleted]);
      await until(
        'both dead letters',
        async () => (await transport.getDeadLetter(retried.messageId)) !== undefined && (await transport.getDeadLetter(deleted.messageId)) !== undefined,
        DEAD_WITHIN_MS,
      );
      failing = false;
      const r = await transport.retryDeadLetter(retried.messageId);
      expect(r).toMatchObject({ messageId: retried.messageId, message: retried, deliveries: MAX_DELIVER });
      await rec.waitFor('the retried message', () => rec.of(retried.messageId).length === MAX_DELIVER + 1);
      const again = rec.of(retried.messageId).at(-1)!.delivery;
      expect(again.deliveryCount).toBe(1);
      expect(again.message).toEqual(retried);
      expect(await transport.getDeadLetter(retried.messageId)).toBeUndefined();
      await eventually(`depth(${w}) after the retried message was acked`, () => transport.depth(w), 0);

      expect(await transport.deleteDeadLetter(deleted.messageId)).toMatchObject({ messageId: deleted.messageId, message: deleted });
      expect(await transport.getDeadLetter(deleted.messageId)).toBeUndefined();
      const listed = (await allDeadLetters(transport)).map((d) => d.messageId);
      expect(listed).not.toContain(retried.messageId);
      expect(listed).not.toContain(deleted.messageId);
      await expect(transport.retryDeadLetter(deleted.messageId)).rejects.toThrow(NotFoundError);
      await expect(transport.deleteDeadLetter(retried.messageId)).rejects.toThrow(`dead letter ${retried.messageId} not found`);
      await expect(transport.getDeadLetter('not-a-uuid')).rejects.toThrow(/messageId must be a uuid/);
      await expect(transport.listDeadLetters({ limit: 0 })).rejects.toThrow(/limit must be an integer from 1 to 1000/);
      await expect(transport.listDeadLetters({ limit: 5, after: 'x' })).rejects.toThrow(/after must be the cursor/);
      expect(rec.of(deleted.messageId).length).toBe(MAX_DELIVER); // the deleted one was never delivered again
    });

    it('hands onDeadLetter what died before it subscribed, and again after its handler failed', async () => {
      const w = newWorker();
      await consume(transport, w, (d) => d.nak());
      const m = workMessage(w);
      await transport.publish([m]);
      await until('the dead letter', async () => (await transport.getDeadLetter(m.messageId)) !== undefined, DEAD_WITHIN_MS);
      const calls: number[] = [];
      // Another transport instance: another process's subscriber.
      const other = await h.open(OPTIONS);
      await subscribe(other, async (d) => {
        if (d.messageId !== m.messageId) return;
        calls.push(performance.now());
        if (calls.length === 1) throw new Error('handler failed (expected by the test)');
      });
      await until('the dead letter handed over a second time', () => calls.length >= 2, 10_000);
      const [first, second] = calls;
      expect(second! - first!).toBeGreaterThanOrEqual(500); // after a back-off, not in a tight loop
      await sleep(500); // a window to show it is not handed over again once the handler resolved
      expect(calls.length).toBe(2);
    });

    it('dedupes by messageId, within one publish and across publishes', async () => {
      const w = newWorker();
      const m = workMessage(w);
      await transport.publish([m, m]);
      await transport.publish([m]);
      await Promise.all([transport.publish([m]), transport.publish([m])]);
      expect(await transport.depth(w)).toBe(1);
      const sentinel = workMessage(w);
      await transport.publish([sentinel]); // published last, delivered after m (one at a time)
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w'), 1);
      await rec.waitFor('the sentinel', () => rec.of(sentinel.messageId).length === 1);
      expect(rec.of(m.messageId).length).toBe(1);
      expect(rec.seen.length).toBe(2);
    });

    it('never runs more than `concurrency` handlers at once', async () => {
      const w = newWorker();
      const concurrency = 4;
      const total = 24;
      let running = 0;
      let peak = 0;
      const rec = new Recorder();
      await transport.publish(Array.from({ length: total }, () => workMessage(w)));
      await consume(
        transport,
        w,
        rec.handler('w', async (d) => {
          peak = Math.max(peak, ++running);
          await sleep(10); // the work
          running--;
          await d.ack();
        }),
        concurrency,
      );
      await rec.waitFor(`${total} deliveries`, () => rec.seen.length === total);
      console.log(`[${name}] peak concurrent handlers: ${peak} (limit ${concurrency})`);
      expect(peak).toBeLessThanOrEqual(concurrency);
      expect(peak).toBe(concurrency); // and it does use the slots it has
    });

    it('shares a worker’s messages between two consumers (two transport instances), each handled by exactly one', async () => {
      const w = newWorker();
      const other = await h.open(OPTIONS);
      await transport.publish(Array.from({ length: 100 }, () => workMessage(w)));
      const rec = new Recorder();
      // Handlers wait (at most half an ack-wait, so nothing is redelivered meanwhile) until both
      // consumers hold a message: the consumer that starts first cannot finish all 100 before
      // the other's first pull, however loaded the machine is.
      const bothBusy = rec
        .waitFor('both consumers to hold a message', () => new Set(rec.seen.map((s) => s.by)).size === 2, ACK_WAIT_MS / 2)
        .catch(() => undefined);
      const work = async (d: Delivery) => {
        await bothBusy;
        await d.ack();
      };
      await consume(transport, w, rec.handler('first', work), 5);
      await consume(other, w, rec.handler('second', work), 5);
      await rec.waitFor('100 deliveries', () => rec.seen.length >= 100, 10_000);
      await eventually(`depth(${w})`, () => transport.depth(w), 0);
      const perMessage = new Map<string, number>();
      for (const s of rec.seen) perMessage.set(s.delivery.message.messageId, (perMessage.get(s.delivery.message.messageId) ?? 0) + 1);
      expect(perMessage.size).toBe(100);
      expect([...perMessage.values()].every((n) => n === 1)).toBe(true);
      expect(rec.seen.length).toBe(100);
      const first = rec.seen.filter((s) => s.by === 'first').length;
      console.log(`[${name}] 100 messages shared by two consumers: ${first} / ${100 - first}`);
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(100);
    });

    it('stop() waits for in-flight handlers, then delivers nothing more', async () => {
      const w = newWorker();
      const rec = new Recorder();
      const [g1, g2] = [held(), held()];
      const finished: string[] = [];
      const consumer = await consume(
        transport,
        w,
        rec.handler('old', async (d, s) => {
          await (rec.seen.indexOf(s) === 0 ? g1 : g2).promise;
          await d.ack();
          finished.push(d.message.messageId);
        }),
        2,
      );
      await transport.publish([workMessage(w), workMessage(w)]);
      await rec.waitFor('two handlers running', () => rec.seen.length === 2);
      let stopped = false;
      const stopping = consumer.stop().then(() => (stopped = true));
      g1.open();
      await sleep(200); // a window to show stop() does not resolve while a handler still runs
      expect(stopped).toBe(false);
      g2.open();
      await stopping;
      expect(finished.length).toBe(2);
      await eventually(`depth(${w}) once both acked`, () => transport.depth(w), 0);
      // Published after stop: none reaches the stopped consumer, and none is held back by it
      // (a new consumer gets them all well within one ack-wait).
      const later = [workMessage(w), workMessage(w), workMessage(w)];
      const t0 = performance.now();
      await transport.publish(later);
      await consume(transport, w, rec.handler('new'));
      await rec.waitFor('the new consumer to get all three', () => rec.seen.filter((s) => s.by === 'new').length === 3);
      expect(performance.now() - t0).toBeLessThan(ACK_WAIT_MS);
      expect(rec.seen.filter((s) => s.by === 'old').length).toBe(2);
    });

    it('redelivers at once what a handler threw on, or returned from without settling', async () => {
      const w = newWorker();
      const rec = new Recorder();
      const throws = workMessage(w, { action: 'throws' });
      const forgets = workMessage(w, { action: 'forgets' });
      await consume(
        transport,
        w,
        rec.handler('w', async (d) => {
          if (d.deliveryCount > 1) return d.ack();
          if (d.message.action === 'throws') throw new Error('handler failed (expected by the test)');
        }),
      );
      const t0 = performance.now();
      await transport.publish([throws, forgets]);
      await rec.waitFor('both redelivered', () => rec.of(throws.messageId).length === 2 && rec.of(forgets.messageId).length === 2);
      expect(performance.now() - t0).toBeLessThan(ACK_WAIT_MS); // nak'ed, not left to the ack-wait
      expect(rec.of(throws.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2]);
      expect(rec.of(forgets.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2]);
      await eventually(`depth(${w})`, () => transport.depth(w), 0);
    });

    it('rejects a malformed message, naming the field, and publishes nothing of that call', async () => {
      const w = newWorker();
      const good = workMessage(w);
      await expect(transport.publish([good, { ...workMessage(w), messageId: 'not-a-uuid' }])).rejects.toThrow(/messages\[1\].*messageId/);
      await expect(transport.publish([{ ...workMessage(w), workerId: '' }])).rejects.toThrow(/messages\[0\].*workerId/);
      await transport.publish([]);
      expect(await transport.depth(w)).toBe(0);
    });

    it('publishes 1,000 messages and consumes them all (throughput report)', async () => {
      const w = newWorker();
      const total = 1_000;
      const messages = Array.from({ length: total }, () => workMessage(w));
      const t0 = performance.now();
      await transport.publish(messages);
      const published = performance.now();
      const rec = new Recorder();
      await consume(transport, w, rec.handler('w'), 50);
      await rec.waitFor(`${total} deliveries`, () => rec.seen.length === total, 20_000);
      const done = performance.now(); // the last handler started (its ack is on its way)
      await eventually(`depth(${w}) after acking all`, () => transport.depth(w), 0);
      const rate = (n: number, ms: number) => Math.round((n / ms) * 1000).toLocaleString('en-US');
      console.log(
        `[${name}] ${total} messages: publish ${rate(total, published - t0)} msgs/s (${(published - t0).toFixed(0)} ms, one call), ` +
          `consume+ack ${rate(total, done - published)} msgs/s at concurrency 50 (${(done - published).toFixed(0)} ms to the last delivery)`,
      );
      expect(new Set(rec.seen.map((s) => s.delivery.message.messageId)).size).toBe(total);
    });

    // ---- worker signals ----

    it('rings one worker: a signal sent to A reaches A’s handler intact, and not B’s', async () => {
      const [a, b] = [newWorker(), newWorker()];
      const inbox = new Inbox();
      await listen(transport, a, inbox.handler('a'));
      await listen(transport, b, inbox.handler('b'));
      const sender = await h.open(OPTIONS); // another process rings
      const forA = workerSignal({ attempt: 3, reason: 'cancelled: “café” ☕ by ops' });
      await sender.sendSignal(a, forA);
      await inbox.waitForSignal('a', forA.executionId);
      expect(inbox.of('a')).toEqual([forA]);
      // The sentinel, sent after A's signal, reaches B: had A's gone to B too, it would be there first.
      const forB = workerSignal();
      await sender.sendSignal(b, forB);
      await inbox.waitForSignal('b', forB.executionId);
      expect(inbox.of('b')).toEqual([forB]);
      expect(inbox.of('a')).toEqual([forA]);
    });

    it('rings every subscription of a worker id (two processes of one worker)', async () => {
      const w = newWorker();
      const other = await h.open(OPTIONS);
      const inbox = new Inbox();
      await listen(transport, w, inbox.handler('first'));
      await listen(other, w, inbox.handler('second'));
      const s = workerSignal();
      await transport.sendSignal(w, s);
      await inbox.waitForSignal('first', s.executionId);
      await inbox.waitForSignal('second', s.executionId);
      expect(inbox.of('first')).toEqual([s]);
      expect(inbox.of('second')).toEqual([s]);
    });

    it('delivers nothing to a subscription after its stop() or its transport’s close()', async () => {
      const w = newWorker();
      const closing = await h.open(OPTIONS);
      const inbox = new Inbox();
      const stopped = await listen(transport, w, inbox.handler('stopped'));
      await listen(closing, w, inbox.handler('closed'));
      await listen(transport, w, inbox.handler('live'));
      const before = workerSignal();
      await transport.sendSignal(w, before);
      for (const by of ['stopped', 'closed', 'live']) await inbox.waitForSignal(by, before.executionId);
      await stopped.stop();
      await stopped.stop(); // idempotent
      await closing.close();
      const after = workerSignal();
      await transport.sendSignal(w, after);
      await inbox.waitForSignal('live', after.executionId);
      await sleep(200); // a short window to show that the stopped and closed ones get nothing more
      expect(inbox.of('stopped')).toEqual([before]);
      expect(inbox.of('closed')).toEqual([before]);
      expect(inbox.of('live')).toEqual([before, after]);
    });

    it('sendSignal resolves when nobody listens', async () => {
      const t0 = performance.now();
      await expect(transport.sendSignal(newWorker(), workerSignal())).resolves.toBeUndefined();
      expect(performance.now() - t0).toBeLessThan(2_000); // handed over, not waiting for a listener
    });

    it('refuses a bad signal or worker id, naming the field, and sends nothing', async () => {
      const w = newWorker();
      const inbox = new Inbox();
      await listen(transport, w, inbox.handler('w'));
      const bad: [string, unknown, RegExp][] = [
        ['attempt 0', workerSignal({ attempt: 0 }), /signal\.attempt/],
        ['attempt 1.5', workerSignal({ attempt: 1.5 }), /signal\.attempt/],
        ['empty executionId', workerSignal({ executionId: '' }), /signal\.executionId/],
        ['empty reason', workerSignal({ reason: '' }), /signal\.reason/],
        ['reason of 1,001 chars', workerSignal({ reason: 'x'.repeat(1_001) }), /signal\.reason.*1000 characters/],
        ['unknown kind', { ...workerSignal(), kind: 'pause' }, /signal\.kind/],
        ['no signal', undefined, /signal/],
      ];
      for (const [what, signal, field] of bad) {
        const sending = transport.sendSignal(w, signal as WorkerSignal);
        await expect(sending, what).rejects.toThrow(InvalidEventError);
        await expect(sending, what).rejects.toThrow(field);
      }
      // Every field within its bounds, but JSON escapes each control character to 6 bytes: more
      // than a NOTIFY carries (under 8000 bytes), refused on every adapter alike.
      const escaped = (n: number) => '\u0001'.repeat(n);
      await expect(transport.sendSignal(escaped(200), workerSignal({ executionId: escaped(200), reason: escaped(1_000) }))).rejects.toThrow(
        /signal\.reason: the encoded signal is \d+ bytes/,
      );
      // The longest reason allowed goes through.
      const longest = workerSignal({ reason: 'é'.repeat(1_000) });
      await transport.sendSignal(w, longest);
      await expect(transport.sendSignal('', workerSignal())).rejects.toThrow(/workerId/);
      await expect(transport.sendSignal('x'.repeat(201), workerSignal())).rejects.toThrow(/workerId/);
      await expect(transport.onSignal('', () => {})).rejects.toThrow(/workerId/);
      await expect(transport.onSignal(w, undefined as unknown as () => void)).rejects.toThrow(/handler must be a function/);
      // None of the refused ones went out: the valid signal sent last is the only one received.
      const sentinel = workerSignal();
      await transport.sendSignal(w, sentinel);
      await inbox.waitForSignal('w', sentinel.executionId);
      expect(inbox.of('w')).toEqual([longest, sentinel]);
    });

    it('drops (and logs) a malformed signal from the wire, and delivers the next one', async () => {
      const w = newWorker();
      const inbox = new Inbox();
      await listen(transport, w, inbox.handler('w'));
      for (const payload of [
        'not json',
        JSON.stringify({ workerId: w }),
        JSON.stringify({ workerId: w, signal: { ...workerSignal(), attempt: 0 } }),
        JSON.stringify({ workerId: w, signal: { ...workerSignal(), kind: 'pause' } }),
      ]) {
        await h.sendRawSignal(w, payload);
      }
      const good = workerSignal();
      await transport.sendSignal(w, good);
      await inbox.waitForSignal('w', good.executionId);
      expect(inbox.of('w')).toEqual([good]);
    });

    it('keeps a subscription whose handler throws, and still rings the others', async () => {
      const w = newWorker();
      const inbox = new Inbox();
      const record = inbox.handler('throws');
      await listen(transport, w, (s) => {
        record(s);
        throw new Error('signal handler failed (expected by the test)');
      });
      await listen(transport, w, inbox.handler('fine'));
      const [first, second] = [workerSignal(), workerSignal()];
      await transport.sendSignal(w, first);
      await transport.sendSignal(w, second);
      await inbox.waitForSignal('throws', second.executionId);
      await inbox.waitForSignal('fine', second.executionId);
      expect(inbox.of('throws')).toEqual([first, second]);
      expect(inbox.of('fine')).toEqual([first, second]);
    });
  });
}
