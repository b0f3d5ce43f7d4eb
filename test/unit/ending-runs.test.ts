import { describe, expect, it } from 'vitest';
import { EndingRuns } from '../../src/executor/ending-runs.ts';

describe('EndingRuns', () => {
  it('counts each ended run once per worker until it is dropped', () => {
    const ending = new EndingRuns();
    expect(ending.add('a', 'w1')).toBe(true);
    expect(ending.add('a', 'w1')).toBe(false); // counted already
    expect(ending.add('b', 'w1')).toBe(true);
    expect(ending.add('c', 'w2')).toBe(true);
    expect([ending.of('w1'), ending.of('w2'), ending.of('w3')]).toEqual([2, 1, 0]);
    ending.drop('a');
    ending.drop('a'); // its outcome settled after its change was seen: nothing more to give back
    ending.drop('unknown');
    expect([ending.of('w1'), ending.of('w2')]).toEqual([1, 1]);
    ending.drop('b');
    ending.drop('c');
    expect([ending.of('w1'), ending.of('w2')]).toEqual([0, 0]);
    expect(ending.add('a', 'w2')).toBe(true); // a later run of the same execution
    expect(ending.of('w2')).toBe(1);
  });
});
