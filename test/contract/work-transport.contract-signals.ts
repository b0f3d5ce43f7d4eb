// The WorkTransport contract's worker-signal tests: onSignal and sendSignal.
import { expect, it } from 'vitest';
import { InvalidEventError } from '../../src/errors.ts';
import type { WorkerSignal } from '../../src/transport/work-transport.ts';
import type { ContractSuite } from './work-transport.contract.ts';
import { newWorker, Observed, OPTIONS, sleep, workerSignal } from './work-transport.fixtures.ts';

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

// ---- worker signals ----

export function signalTests(suite: ContractSuite): void {
  const { listen } = suite;

  it('rings one worker: a signal sent to A reaches A’s handler intact, and not B’s', async () => {
    const { h, transport } = suite;
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
    const { h, transport } = suite;
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
    const { h, transport } = suite;
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
    const { transport } = suite;
    const t0 = performance.now();
    await expect(transport.sendSignal(newWorker(), workerSignal())).resolves.toBeUndefined();
    expect(performance.now() - t0).toBeLessThan(2_000); // handed over, not waiting for a listener
  });

  it('refuses a bad signal or worker id, naming the field, and sends nothing', async () => {
    const { transport } = suite;
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
    const { h, transport } = suite;
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
    const { transport } = suite;
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
}
