// What the projector's drift check samples: the executions it changed last, each once, newest
// last, bounded.
import { describe, expect, it } from 'vitest';
import { RecentlyChanged } from '../../src/readmodel/drift.ts';

describe('RecentlyChanged', () => {
  it('keeps the last ids changed, each once, in the order last changed', () => {
    const recent = new RecentlyChanged(3);
    recent.add(['a', 'b']);
    recent.add(['c', 'a']);
    expect(recent.newest(10)).toEqual(['b', 'c', 'a']);
    recent.add(['d']);
    expect(recent.newest(10)).toEqual(['c', 'a', 'd']);
    expect(recent.newest(2)).toEqual(['a', 'd']);
  });

  it('holds nothing until something changed', () => {
    expect(new RecentlyChanged(5).newest(5)).toEqual([]);
  });
});
