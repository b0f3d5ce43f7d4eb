// The snapshot cache's bounds: past its size the entry not read for longest goes (a clock
// approximation of least-recently-used), a final actor leaves at once with its last revision
// remembered, and an older revision never replaces a newer one.
import { describe, expect, it } from 'vitest';
import { SnapshotCache } from '../../src/runtime/snapshot-cache.ts';

type Snap = { name: string; final?: boolean };
const cache = (max: number) => new SnapshotCache<Snap>((s) => s.final === true, max);
const held = (c: SnapshotCache<Snap>) => [...c.ids()].sort();

describe('SnapshotCache', () => {
  it('past its bound evicts what was not read since it was stored, oldest first', () => {
    const c = cache(3);
    for (const id of ['a', 'b', 'c']) c.put(id, { name: id }, 0n);
    expect(c.get('a')?.snapshot.name).toBe('a');
    c.put('d', { name: 'd' }, 0n); // b: stored before c and d, never read
    expect(held(c)).toEqual(['a', 'c', 'd']);
    c.put('e', { name: 'e' }, 0n); // c: the oldest unread
    expect(held(c)).toEqual(['a', 'd', 'e']);
    c.put('f', { name: 'f' }, 0n); // a: its read was before d and e were stored
    expect(held(c)).toEqual(['d', 'e', 'f']);
    expect(c.size).toBe(3);
  });

  it('when every entry was read, evicts the oldest after passing them all once', () => {
    const c = cache(2);
    c.put('a', { name: 'a' }, 0n);
    c.put('b', { name: 'b' }, 0n);
    c.get('a');
    c.get('b');
    c.put('c', { name: 'c' }, 0n); // a was read before b: a goes, never the entry being stored
    expect(held(c)).toEqual(['b', 'c']);
  });

  it('a stored revision is never replaced by an older one; a newer one replaces it', () => {
    const c = cache(10);
    c.put('a', { name: 'v5' }, 5n);
    c.put('a', { name: 'v3' }, 3n);
    expect(c.get('a')).toMatchObject({ snapshot: { name: 'v5' }, revision: 5n });
    c.put('a', { name: 'v6' }, 6n);
    expect(c.get('a')).toMatchObject({ snapshot: { name: 'v6' }, revision: 6n });
  });

  it('forgets a final actor at once and remembers the revision it ended at', () => {
    const c = cache(10);
    c.put('a', { name: 'running' }, 2n);
    c.put('a', { name: 'done', final: true }, 3n);
    expect(c.get('a')).toBeUndefined();
    expect(c.endedAt('a')).toBe(3n);
    c.delete('a');
    expect(c.endedAt('a')).toBeUndefined();
  });
});
