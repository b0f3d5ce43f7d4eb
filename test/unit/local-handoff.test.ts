// Handing work over in process (src/transport/local-handoff.ts): who is offered what, and how the
// transport's copy of a message run here is settled. End to end with a real executor, worker and
// both transports: test/integration/local-handoff.test.ts.
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { handOverLocally, localRuns, openLocalInbox } from '../../src/transport/local-handoff.ts';
import type { Delivery, WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';

const log = pino({ level: 'silent' });
const message = (workerId = 'w-1'): WorkMessage => ({
  messageId: randomUUID(),
  executionId: randomUUID(),
  workerId,
  runtime: 'node',
  action: 'test.noop',
  attempt: 1,
  handoffRevision: '2',
  publishedAt: new Date().toISOString(),
});

/** A transport copy of `m` that records how it was settled. */
function copyOf(m: WorkMessage): Delivery & { settled: string[] } {
  const settled: string[] = [];
  const record = (what: string) => async () => void settled.push(what);
  return { message: m, deliveryCount: 1, settled, ack: record('ack'), term: record('term'), nak: record('nak'), working: record('working') };
}

const startNow = (task: () => Promise<void>) => (void task(), true);

describe('handOverLocally', () => {
  it('offers each message to the inbox of its worker on that transport only, and counts what was taken', () => {
    const transport = {} as WorkTransport;
    const other = {} as WorkTransport;
    const offered: string[] = [];
    const close = openLocalInbox(transport, 'w-1', (m) => (offered.push(m.messageId), true));
    openLocalInbox(transport, 'w-2', () => false); // full
    const mine = message('w-1');
    expect(handOverLocally(transport, [mine, message('w-2'), message('w-3')])).toBe(1);
    expect(offered).toEqual([mine.messageId]);
    expect(handOverLocally(other, [message('w-1')])).toBe(0);
    close();
    expect(handOverLocally(transport, [message('w-1')])).toBe(0);
  });
});

describe('localRuns', () => {
  it('acks the copy of a message run here once that run settled its own delivery, and forwards heartbeats to it', async () => {
    let finish!: () => void;
    const runs = localRuns(async (d) => {
      await d.working(); // before the copy came: nothing to extend
      await new Promise<void>((r) => (finish = r));
      await d.working();
      await d.ack();
    }, log);
    const m = message();
    expect(runs.take(m, startNow)).toBe(true);
    const copy = copyOf(m);
    let settledCopy: boolean | undefined;
    const settling = runs.settleCopy(copy).then((b) => (settledCopy = b));
    await new Promise((r) => setTimeout(r, 5));
    expect(settledCopy).toBeUndefined(); // waits for the run
    finish();
    await settling;
    expect(settledCopy).toBe(true);
    expect(copy.settled).toEqual(['working', 'ack']);
    // Settled once: a later delivery of the same message is an ordinary one.
    expect(await runs.settleCopy(copyOf(m))).toBe(false);
  });

  it('leaves the copy to run as usual when the local run failed before settling, or was never taken', async () => {
    const runs = localRuns(async () => {
      throw new Error('database hiccup');
    }, log);
    const failed = message();
    expect(runs.take(failed, startNow)).toBe(true);
    const copy = copyOf(failed);
    expect(await runs.settleCopy(copy)).toBe(false);
    expect(copy.settled).toEqual([]);
    // No free slot: not taken, and its copy is not waited for.
    const refused = message();
    expect(runs.take(refused, () => false)).toBe(false);
    expect(await runs.settleCopy(copyOf(refused))).toBe(false);
    expect(await runs.settleCopy(copyOf(message()))).toBe(false);
  });
});
