// The rate-limit bucket machine, pure: over generated grant sequences (several executors with
// their own wants, in any order) no window of `windowMs` ever holds more than the limit, the
// machine refuses exactly the grants that would break it, tokensAt says when the next token
// comes back, a fold equals step-by-step decisions, and recorded histories replay without
// divergence.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideRateBucket, emptyRateBucket, foldRateBucket, tokensAt, type RateBucketSnapshot } from '../../actors/rate-bucket.machine.ts';
import { RateLimitPolicy, rateOf, type RateLimitEvent } from '../../schemas/rate-limit-events.ts';
import { z } from 'zod';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { rateBucketOf } from '../../src/executor/rate-limits.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const grant = (at: number, count: number, limit: number, windowMs: number): RateLimitEvent => ({
  type: 'RateTokensGranted',
  data: { at: new Date(at).toISOString(), count, limit, windowMs },
  metadata: { by: 'executor', occurredAt: new Date(at).toISOString() },
});

/** The most grants any window (s − windowMs, s] holds, checked at every grant's time (where the maximum is reached). */
function busiestWindow(grants: { at: number; count: number }[], windowMs: number): number {
  let most = 0;
  for (const g of grants) most = Math.max(most, grants.filter((h) => h.at > g.at - windowMs && h.at <= g.at).reduce((n, h) => n + h.count, 0));
  return most;
}

// A pass: some ms later, an executor wants some tokens.
const passes = fc.array(fc.record({ gapMs: fc.integer({ min: 0, max: 700 }), wanted: fc.integer({ min: 1, max: 12 }) }), { minLength: 1, maxLength: 60 });
const limits = fc.integer({ min: 1, max: 10 });
const windows = fc.constantFrom(1_100, 60_100, 300);

describe('rate bucket machine', () => {
  it('grants what tokensAt offers, and never more than the limit in any window', () => {
    fc.assert(
      fc.property(passes, limits, windows, (ps, limit, windowMs) => {
        let s: RateBucketSnapshot = emptyRateBucket();
        let now = T0;
        const granted: { at: number; count: number }[] = [];
        for (const p of ps) {
          now += p.gapMs;
          const t = tokensAt(s, limit, windowMs, now);
          const count = Math.min(p.wanted, t.available);
          if (count === 0) {
            expect(t.nextAt).toBeGreaterThan(now);
            // A grant anyway is refused, naming what is left.
            const d = decideRateBucket(s, grant(t.at, 1, limit, windowMs));
            expect(d.ok).toBe(false);
            continue;
          }
          const d = decideRateBucket(s, grant(t.at, count, limit, windowMs));
          expect(d.ok).toBe(true);
          s = (d as { snapshot: RateBucketSnapshot }).snapshot;
          granted.push({ at: t.at, count });
        }
        expect(busiestWindow(granted, windowMs)).toBeLessThanOrEqual(limit);
        expect(s.context.granted).toBe(granted.reduce((n, g) => n + g.count, 0));
      }),
      { numRuns: 300 },
    );
  });

  it('accepts of arbitrary grants (racing executors, any count, any time) only those that keep every window within the limit', () => {
    const attempts = fc.array(fc.record({ at: fc.integer({ min: 0, max: 5_000 }), count: fc.integer({ min: 1, max: 6 }) }), { minLength: 1, maxLength: 40 });
    fc.assert(
      fc.property(attempts, limits, (as, limit) => {
        const windowMs = 1_100;
        let s = emptyRateBucket();
        const accepted: { at: number; count: number }[] = [];
        const history: RateLimitEvent[] = [];
        for (const a of as) {
          const e = grant(T0 + a.at, a.count, limit, windowMs);
          const d = decideRateBucket(s, e);
          const latest = accepted.at(-1)?.at ?? -Infinity;
          const wouldFit = T0 + a.at >= latest && busiestWindow([...accepted, { at: T0 + a.at, count: a.count }], windowMs) <= limit;
          expect(d.ok).toBe(wouldFit);
          if (!d.ok) continue;
          s = d.snapshot;
          accepted.push({ at: T0 + a.at, count: a.count });
          history.push(e);
        }
        // The stored history folds to the same state it was decided into.
        if (history.length > 0) expect(foldRateBucket(history).context).toEqual(s.context);
      }),
      { numRuns: 300 },
    );
  });

  it('tokensAt: the next token comes back exactly at nextAt, not a millisecond before', () => {
    fc.assert(
      fc.property(passes, limits, (ps, limit) => {
        const windowMs = 1_100;
        let s = emptyRateBucket();
        let now = T0;
        for (const p of ps) {
          now += p.gapMs;
          const t = tokensAt(s, limit, windowMs, now);
          if (t.available === 0) {
            expect(tokensAt(s, limit, windowMs, t.nextAt! - 1).available).toBe(0);
            expect(tokensAt(s, limit, windowMs, t.nextAt!).available).toBeGreaterThan(0);
            continue;
          }
          s = (decideRateBucket(s, grant(t.at, Math.min(p.wanted, t.available), limit, windowMs)) as { snapshot: RateBucketSnapshot }).snapshot;
        }
      }),
      { numRuns: 200 },
    );
  });

  it('decides on the latest grant’s time when the caller’s clock is behind, and refuses a grant dated earlier', () => {
    const s = (decideRateBucket(emptyRateBucket(), grant(T0 + 500, 1, 5, 1_100)) as { snapshot: RateBucketSnapshot }).snapshot;
    expect(tokensAt(s, 5, 1_100, T0)).toEqual({ at: T0 + 500, available: 4 });
    const d = decideRateBucket(s, grant(T0 + 100, 1, 5, 1_100));
    expect(d).toEqual({ ok: false, reason: 'grant at 2026-01-01T00:00:00.100Z is earlier than the latest grant (2026-01-01T00:00:00.500Z)' });
    const over = decideRateBucket(s, grant(T0 + 600, 5, 5, 1_100));
    expect(over).toEqual({ ok: false, reason: '5 tokens asked, 4 left of 5 per 1100 ms' });
  });

  it('replays recorded histories with the state recorded at each event, without divergence', () => {
    fc.assert(
      fc.property(passes, limits, (ps, limit) => {
        let s = emptyRateBucket();
        let now = T0;
        const recorded: RateLimitEvent[] = [];
        for (const p of ps) {
          now += p.gapMs;
          const t = tokensAt(s, limit, 1_100, now);
          if (t.available === 0) continue;
          const e = grant(t.at, Math.min(p.wanted, t.available), limit, 1_100);
          s = (decideRateBucket(s, e) as { snapshot: RateBucketSnapshot }).snapshot;
          recorded.push({ ...e, metadata: { ...e.metadata, stateAfter: String(s.value) } });
        }
        let r = emptyRateBucket();
        for (const e of recorded) {
          const d = decideRateBucket(r, e);
          expect(d.ok).toBe(true);
          r = (d as { snapshot: RateBucketSnapshot }).snapshot;
          expect(String(r.value)).toBe(e.metadata.stateAfter);
        }
        expect(r.context).toEqual(s.context);
      }),
      { numRuns: 100 },
    );
  });
});

describe('rate-limit policy', () => {
  it('takes exactly one of perSecond and perMinute, and a key path', () => {
    expect(rateOf(RateLimitPolicy.parse({ perSecond: 5 }))).toEqual({ limit: 5, periodMs: 1_000 });
    expect(rateOf(RateLimitPolicy.parse({ perMinute: 90, key: 'tenant.id' }))).toEqual({ limit: 90, periodMs: 60_000 });
    expect(RateLimitPolicy.safeParse({ perSecond: 5, perMinute: 5 }).success).toBe(false);
    expect(RateLimitPolicy.safeParse({}).success).toBe(false);
    expect(RateLimitPolicy.safeParse({ perSecond: 0 }).success).toBe(false);
    expect(RateLimitPolicy.safeParse({ perSecond: 1, key: 'a..b' }).success).toBe(false);
  });

  it('names a bucket per action, and per key value as a digest', () => {
    expect(rateBucketOf('mail.send', {}, () => ({ tenant: 'a' }))).toBe('mail.send');
    const a = rateBucketOf('mail.send', { key: 'tenant' }, () => ({ tenant: 'a' }));
    expect(a).toMatch(/^mail\.send~[0-9a-f]{32}$/);
    expect(rateBucketOf('mail.send', { key: 'tenant' }, () => ({ tenant: 'a', n: 1 }))).toBe(a);
    expect(rateBucketOf('mail.send', { key: 'tenant' }, () => ({ tenant: 'b' }))).not.toBe(a);
    expect(rateBucketOf('mail.send', { key: 'tenant' }, () => ({}))).toBe('mail.send');
  });
});

describe('rateLimit on defineAction', () => {
  const define = (rateLimit: unknown) => defineAction({ name: 'mail.send', input: z.object({ tenant: z.string() }), rateLimit: rateLimit as never, run: () => null });

  it('refuses a limit it does not understand, naming the field', () => {
    expect(() => define({ perSecond: 5, perMinute: 5 })).toThrow('rateLimit: give exactly one of perSecond and perMinute');
    expect(() => define({ persecond: 5 })).toThrow(/rateLimit\.persecond: unknown field; did you mean "perSecond"\?/);
    expect(() => define({ perMinute: 0 })).toThrow('rateLimit.perMinute: must be an integer from 1 to 100000');
    expect(() => define({ perSecond: 1, key: 'a b' })).toThrow(/rateLimit\.key: must be a dotted path/);
  });

  it('is advertised by the worker with the action’s other policies', () => {
    const a = define({ perMinute: 3, key: 'tenant' });
    expect(a.rateLimit).toEqual({ perMinute: 3, key: 'tenant' });
    expect(createActionRegistry([a]).policies()['mail.send']).toMatchObject({ rateLimit: { perMinute: 3, key: 'tenant' } });
  });
});
