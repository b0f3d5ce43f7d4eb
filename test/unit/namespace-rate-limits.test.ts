import { describe, expect, it } from 'vitest';
import { namespaceRateBucket, parseNamespaceRateLimits } from '../../src/executor/namespace-rate-limits.ts';
import { namespaceRateLimitsSetting } from '../../src/config-values.ts';

describe('BATON_NAMESPACE_RATE_LIMIT', () => {
  it('parses rates per second and per minute by namespace', () => {
    expect(parseNamespaceRateLimits('team-a=100/s, team-b=600/m')).toEqual({ ok: true, limits: { 'team-a': { perSecond: 100 }, 'team-b': { perMinute: 600 } } });
    expect(namespaceRateLimitsSetting.parse('')).toEqual({});
    expect(namespaceRateLimitsSetting.parse(undefined)).toEqual({});
  });

  it('refuses bad entries, naming the entry', () => {
    const bad = (t: string) => {
      const r = parseNamespaceRateLimits(t);
      return r.ok ? undefined : r.problem;
    };
    expect(bad('team-a=100')).toMatch(/"team-a=100" must be <namespace>=<limit>\/s/);
    expect(bad('team-a=0/s')).toMatch(/team-a: the rate must be from 1 to/);
    expect(bad('team-a=100001/s')).toMatch(/team-a: the rate must be from 1/);
    expect(bad('Bad Name=5/s')).toMatch(/"Bad Name"/);
    expect(namespaceRateLimitsSetting.safeParse('x=5/h').success).toBe(false);
    // Which of two would win is anyone's guess: refused, not silently the last.
    expect(bad('team-a=5/s, team-a=6/s')).toBe('team-a is given twice: one limit per namespace');
  });

  it("keeps a namespace's bucket apart from any action's", () => {
    expect(namespaceRateBucket('team-a')).toBe('~ns~team-a');
  });
});
