// The WorkTransport contract's dead-letter tests: what exhausts its deliveries is handed to
// onDeadLetter, listed, shown, retried and deleted.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { NotFoundError } from '../../src/errors.ts';
import type { DeadLetter, WorkTransport } from '../../src/transport/work-transport.ts';
import { until } from '../support/until.ts';
import type { ContractSuite } from './work-transport.contract.ts';
import { ACK_WAIT_MS, eventually, MAX_DELIVER, newWorker, OPTIONS, Recorder, sleep, workMessage } from './work-transport.fixtures.ts';

// Max-deliver 3 and a 1 s ack-wait: a nak'ed message dies at once, an unsettled one after
// three ack-waits; onDeadLetter and the lists see it within a few seconds more.
const DEAD_WITHIN_MS = ACK_WAIT_MS * MAX_DELIVER + 5_000;
const REASON = `not acknowledged after ${MAX_DELIVER} deliveries`;

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

export function deadLetterTests(suite: ContractSuite): void {
  const { consume, subscribe, held } = suite;

  it(`makes a message nak'ed on each of its ${MAX_DELIVER} deliveries a dead letter: handed to onDeadLetter, listed and shown`, async () => {
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { transport } = suite;
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
    const { h, transport } = suite;
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
}
