// The WorkTransport contract's delivery tests: delivery and depth, acks, redelivery (nak, ack-wait,
// working()), max-deliver, dedupe, concurrency, two consumers, stop, failing handlers, malformed
// messages and throughput. work-transport.contract.ts registers them in two parts, either side
// of the dead-letter tests.
import { expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/work-transport.ts';
import type { ContractSuite } from './work-transport.contract.ts';
import { ACK_WAIT_MS, eventually, MAX_DELIVER, newWorker, OPTIONS, QUIET_WINDOW_MS, Recorder, sleep, workMessage } from './work-transport.fixtures.ts';

/** Delivery, depth, acks, redelivery and max-deliver: the tests before the dead letters. */
export function deliveryTests(suite: ContractSuite): void {
  const { name, consume, held } = suite;

  it('delivers a message once, intact, to its worker and not to another worker', async () => {
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
}

/** Dedupe, concurrency, two consumers, stop, failing handlers, malformed messages and throughput: the tests after the dead letters. */
export function consumerTests(suite: ContractSuite): void {
  const { name, consume, held } = suite;

  it('dedupes by messageId, within one publish and across publishes', async () => {
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { h, transport } = suite;
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
    const { transport } = suite;
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

  it('redelivers after a short back-off what a handler threw on, or returned from without settling', async () => {
    const { transport } = suite;
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
    // Nak'ed with the first back-off (redeliveryDelayMs: 250 ms), not left to the ack-wait, and not at once.
    expect(performance.now() - t0).toBeLessThan(ACK_WAIT_MS);
    const gap = (id: string) => rec.of(id)[1]!.at - rec.of(id)[0]!.at;
    expect(Math.min(gap(throws.messageId), gap(forgets.messageId))).toBeGreaterThanOrEqual(200);
    expect(rec.of(throws.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2]);
    expect(rec.of(forgets.messageId).map((s) => s.delivery.deliveryCount)).toEqual([1, 2]);
    await eventually(`depth(${w})`, () => transport.depth(w), 0);
  });

  it('rejects a malformed message, naming the field, and publishes nothing of that call', async () => {
    const { transport } = suite;
    const w = newWorker();
    const good = workMessage(w);
    await expect(transport.publish([good, { ...workMessage(w), messageId: 'not-a-uuid' }])).rejects.toThrow(/messages\[1\].*messageId/);
    await expect(transport.publish([{ ...workMessage(w), workerId: '' }])).rejects.toThrow(/messages\[0\].*workerId/);
    await transport.publish([]);
    expect(await transport.depth(w)).toBe(0);
  });

  it('publishes 1,000 messages and consumes them all (throughput report)', async () => {
    const { transport } = suite;
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
}
