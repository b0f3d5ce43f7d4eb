// availableBatches: whatever the source already holds goes in one batch (up to the bound); an
// item that is not there yet ends the batch instead of being waited for.
import { describe, expect, it } from 'vitest';
import { availableBatches } from '../../src/readmodel/batches.ts';

/** Yields `groups`: the items of a group at once, then waits a timer before the next group. */
async function* arriving(groups: number[][], closed: { done: boolean }): AsyncGenerator<number> {
  try {
    for (const [i, group] of groups.entries()) {
      if (i > 0) await new Promise((r) => setTimeout(r, 5));
      for (const item of group) yield item;
    }
  } finally {
    closed.done = true;
  }
}

async function collect(source: AsyncIterable<number>, max: number): Promise<number[][]> {
  const out: number[][] = [];
  for await (const batch of availableBatches(source, max)) out.push(batch);
  return out;
}

describe('availableBatches', () => {
  it('batches what is there together, splits where the source has to wait, and bounds each batch', async () => {
    const closed = { done: false };
    const groups = [[1, 2, 3, 4, 5], [6], [7, 8, 9]];
    expect(await collect(arriving(groups, closed), 4)).toEqual([[1, 2, 3, 4], [5], [6], [7, 8, 9]]);
    expect(closed.done).toBe(true);
  });

  it('gathers thousands of ready items into full batches, not one per turn', async () => {
    const closed = { done: false };
    const items = Array.from({ length: 2_500 }, (_, i) => i);
    const batches = await collect(arriving([items], closed), 1_000);
    expect(batches.map((b) => b.length)).toEqual([1_000, 1_000, 500]);
    expect(batches.flat()).toEqual(items);
  });

  it('closes the source when the consumer stops early', async () => {
    const closed = { done: false };
    for await (const batch of availableBatches(arriving([[1, 2], [3]], closed), 10)) {
      expect(batch).toEqual([1, 2]);
      break;
    }
    expect(closed.done).toBe(true);
  });
});
