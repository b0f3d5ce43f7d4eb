// Which of a store's own transactions a `stream` scan may pass over (src/eventstore/pg-own-commits.ts).
import { describe, expect, it } from 'vitest';
import { OwnCommits } from '../../src/eventstore/pg-own-commits.ts';

const sorted = (xids: string[]) => [...xids].sort((x, y) => Number(BigInt(x) - BigInt(y)));

describe('OwnCommits', () => {
  const a = { appender: 'a' };
  const b = { appender: 'b' };

  it('gives the transactions of the listed appenders after the cursor, and pending ones below it', () => {
    const own = new OwnCommits();
    own.add('10', a);
    own.add('12', b);
    own.add('15', a);
    own.add('9', a);
    expect(sorted(own.of(new Set([a]), '9', []))).toEqual(['10', '15']);
    expect(sorted(own.of(new Set([a, b]), '11', []))).toEqual(['12', '15']);
    // Below the cursor but still in progress at the last read: its rows may come yet.
    expect(sorted(own.of(new Set([a]), '11', ['9', '10']))).toEqual(['9', '10', '15']);
    // Compared as numbers, not as text.
    expect(own.of(new Set([a]), '100', [])).toEqual([]);
  });

  it('gives nothing to a subscription that names no appender', () => {
    const own = new OwnCommits();
    own.add('10', a);
    expect(own.of(undefined, '0', [])).toEqual([]);
    expect(own.of(new Set(), '0', [])).toEqual([]);
    expect(own.of(new Set([b]), '0', [])).toEqual([]);
  });

  it('walks back only as far as a scan from the cursor can reach, answers a little out of order included', () => {
    const own = new OwnCommits();
    for (let x = 1; x <= 1_000; x++) own.add(String(x), a);
    own.add('995', a); // an answer that came late: behind the newest, still after the cursor
    own.add('1001', a);
    expect(sorted(own.of(new Set([a]), '990', []))).toEqual(['991', '992', '993', '994', '995', '995', '996', '997', '998', '999', '1000', '1001']);
    // A pending transaction well below the cursor is found too.
    expect(sorted(own.of(new Set([a]), '999', ['950']))).toEqual(['950', '1000', '1001']);
  });

  it('forgets the oldest once it holds many (a forgotten one is only read back)', () => {
    const own = new OwnCommits();
    for (let x = 1; x <= 20_000; x++) own.add(String(x), a);
    const kept = own.of(new Set([a]), '0', []);
    expect(kept.length).toBeLessThan(20_000);
    expect(kept.length).toBeGreaterThanOrEqual(4_096);
    expect(kept).toContain('20000');
  });
});
