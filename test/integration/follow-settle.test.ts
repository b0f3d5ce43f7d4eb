// A `global` subscription's settleMs (the projector's SETTLE_MS): once caught up and idle, the read
// an append wakes waits that long, so what follows within it comes in the same read; without it,
// the first event is read at once.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

describe('a global subscription woken after a quiet spell', () => {
  const t = useTestStore();

  const append = (stream: string) => t.store.append(stream, [{ eventId: randomUUID(), type: 'Noted', data: {}, metadata: {} }], { expectedRevision: 'any' });

  /** Subscribe to a fresh prefix, append one event, another `gapMs` later; when each arrived, ms after the first append. */
  async function arrivals(settleMs: number, gapMs: number): Promise<number[]> {
    const prefix = `settle-${randomUUID()}-`;
    const ac = new AbortController();
    const at: number[] = [];
    const subscription = t.store.subscribe({ after: 0n, streamPrefixes: [prefix], signal: ac.signal, settleMs, minReadIntervalMs: 0 });
    let t0 = 0;
    const reading = (async () => {
      for await (const _ of subscription) at.push(performance.now() - t0);
    })();
    // Its first read finds nothing; then it waits, idle (a margin for a loaded machine).
    await new Promise((r) => setTimeout(r, 500));
    t0 = performance.now();
    await append(`${prefix}a`);
    await new Promise((r) => setTimeout(r, gapMs));
    await append(`${prefix}b`);
    await until('both events read', () => at.length === 2);
    ac.abort();
    await reading;
    return at;
  }

  it('with settleMs, reads the waking event and what followed it within that time together', async () => {
    const [first, second] = await arrivals(400, 100);
    expect(first).toBeGreaterThanOrEqual(400);
    expect(second! - first!).toBeLessThan(50); // the same read
  });

  it('without it, reads the waking event at once', async () => {
    const [first, second] = await arrivals(0, 400);
    expect(first).toBeLessThan(400); // before the second was appended
    expect(second).toBeGreaterThanOrEqual(400);
  });
});
