// The rate-limit bucket machine: may these tokens be granted now? Pure: no I/O, no clock (times
// come from the events and, for planning, from the caller). A bucket holds `limit` tokens; a
// granted token comes back `windowMs` after it was granted (a sliding window, not a refill
// rate: a refilling bucket of `limit` tokens lets up to 2 × limit through in one period, and
// the limit protects someone else's service). So in any window of `windowMs`, the grants on
// the stream add up to at most `limit`, whichever executors appended them. Grants are kept in
// order of their time: one dated before the latest is refused (an executor with a slow clock
// decides on the latest time instead: tokensAt).
import { assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { foldWith } from './fold.ts';
import { stepperOf } from './stepper.ts';
import { MAX_WINDOW_MS, type RateLimitEvent } from '../schemas/rate-limit-events.ts';

export const RATE_BUCKET_MACHINE_VERSION = '1';

export interface RateBucketContext {
  /** Grants of the last MAX_WINDOW_MS before the latest one (ms since epoch), oldest first. */
  recent: { at: number; count: number }[];
  /** Tokens granted over the stream's whole life. */
  granted: number;
}

/** Tokens taken within (at − windowMs, at]. */
function usedAt(c: RateBucketContext, at: number, windowMs: number): number {
  let used = 0;
  for (let i = c.recent.length - 1; i >= 0 && c.recent[i]!.at > at - windowMs; i--) used += c.recent[i]!.count;
  return used;
}

const latestAt = (c: RateBucketContext): number => c.recent.at(-1)?.at ?? -Infinity;

function grantFits(c: RateBucketContext, e: RateLimitEvent): boolean {
  const at = Date.parse(e.data.at);
  return at >= latestAt(c) && e.data.count <= e.data.limit - usedAt(c, at, e.data.windowMs);
}

export const rateBucketMachine = setup({
  types: { context: {} as RateBucketContext, events: {} as RateLimitEvent },
  guards: { fits: ({ context, event }) => grantFits(context, event) },
  actions: {
    grant: assign(({ context, event }) => {
      assertEvent(event, 'RateTokensGranted');
      const at = Date.parse(event.data.at);
      const recent = context.recent.filter((g) => g.at > at - MAX_WINDOW_MS);
      const last = recent.at(-1);
      // Grants of one millisecond add up: the window only ever asks for sums.
      if (last && last.at === at) recent[recent.length - 1] = { at, count: last.count + event.data.count };
      else recent.push({ at, count: event.data.count });
      return { recent, granted: context.granted + event.data.count };
    }),
  },
}).createMachine({
  id: 'rateBucket',
  initial: 'Open',
  context: { recent: [], granted: 0 },
  states: { Open: { on: { RateTokensGranted: { guard: 'fits', actions: 'grant' } } } },
});

export type RateBucketSnapshot = SnapshotFrom<typeof rateBucketMachine>;

const step = stepperOf(rateBucketMachine, undefined as never);

/** A bucket whose stream has no events yet: every token there. */
export const emptyRateBucket = (): RateBucketSnapshot => step.initial(undefined as never);

export type RateBucketDecision = { ok: true; snapshot: RateBucketSnapshot } | { ok: false; reason: string };

export function explainRateBucketRefusal(snapshot: RateBucketSnapshot, event: RateLimitEvent): string {
  const c = snapshot.context;
  const at = Date.parse(event.data.at);
  if (at < latestAt(c)) return `grant at ${event.data.at} is earlier than the latest grant (${new Date(latestAt(c)).toISOString()})`;
  return `${event.data.count} tokens asked, ${Math.max(0, event.data.limit - usedAt(c, at, event.data.windowMs))} left of ${event.data.limit} per ${event.data.windowMs} ms`;
}

export function decideRateBucket(snapshot: RateBucketSnapshot, event: RateLimitEvent): RateBucketDecision {
  if (snapshot.can(event)) return { ok: true, snapshot: step.next(snapshot, event) };
  return { ok: false, reason: explainRateBucketRefusal(snapshot, event) };
}

export function foldRateBucket(events: readonly RateLimitEvent[]): RateBucketSnapshot {
  return foldWith(step, emptyRateBucket(), events, explainRateBucketRefusal);
}

export interface Tokens {
  /** The time to decide at: now, or the latest grant's time when that is later (another executor's clock ran ahead). */
  at: number;
  /** Tokens that may be granted at `at`. */
  available: number;
  /** When the next token comes back, when none is left; undefined when some are. */
  nextAt?: number;
}

/** What the bucket holds at `now` under `limit` per `windowMs`. */
export function tokensAt(snapshot: RateBucketSnapshot, limit: number, windowMs: number, now: number): Tokens {
  const c = snapshot.context;
  const at = Math.max(now, latestAt(c));
  let used = usedAt(c, at, windowMs);
  const available = Math.max(0, limit - used);
  if (available > 0) return { at, available };
  // Oldest first, the grants in the window come back windowMs after they were taken.
  for (const g of c.recent) {
    if (g.at <= at - windowMs) continue;
    used -= g.count;
    if (used < limit) return { at, available, nextAt: g.at + windowMs };
  }
  return { at, available, nextAt: at + windowMs };
}
