// When a schedule's ticks fall: pure functions of its spec and the time its grid was anchored
// at (creation, or the update that changed its trigger). Cron expressions (5 fields, or 6 with
// seconds) in a time zone go through croner, which handles DST as cron does (a local time that
// does not exist fires at the next one that does; a repeated one fires once); a fixed interval
// ticks at anchor + k·every. `startAt` is inclusive, `endAt` exclusive. No clock is read here:
// every "now" is an argument.
import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import type { ScheduleSpec, Trigger } from '../schemas/schedule-events.ts';

const CRON_MODE = '5-or-6-parts' as const;

// Parsed patterns, by (expression, zone): a schedule's ticks are computed often.
const patterns = new Map<string, Cron>();

function cronOf(cron: string, timezone: string): Cron {
  const key = `${timezone} ${cron}`;
  let c = patterns.get(key);
  if (!c) {
    c = new Cron(cron, { timezone, mode: CRON_MODE, paused: true });
    if (patterns.size >= 1_000) patterns.delete(patterns.keys().next().value!);
    patterns.set(key, c);
  }
  return c;
}

/** Why `timezone` is no IANA time zone, or undefined. */
export function timezoneProblem(timezone: string): string | undefined {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return undefined;
  } catch {
    return `unknown time zone "${timezone.slice(0, 100)}" (an IANA name such as UTC, Europe/Berlin, America/New_York)`;
  }
}

/** Why `cron` is no 5- or 6-field cron expression croner reads, or undefined. */
export function cronProblem(cron: string, timezone = 'UTC'): string | undefined {
  try {
    new Cron(cron, { timezone, mode: CRON_MODE, paused: true });
    return undefined;
  } catch (err) {
    return `invalid cron expression: ${(err as Error).message.replace(/^CronPattern: /, '')}`;
  }
}

/** The first time of `trigger`'s grid strictly after `after`, ignoring start and end dates. */
function gridAfter(trigger: Trigger, anchorAt: number, after: number): number | undefined {
  if (trigger.kind === 'every') {
    if (after < anchorAt) return anchorAt;
    return anchorAt + (Math.floor((after - anchorAt) / trigger.everyMs) + 1) * trigger.everyMs;
  }
  const next = cronOf(trigger.cron, trigger.timezone).nextRun(new Date(after));
  return next ? next.getTime() : undefined;
}

/**
 * No tick at or after 10000-01-01T00:00:00Z: every date Baton takes and gives is in years 0001 to
 * 9999 (RFC 3339), and a later one would print as `+010000-…`, which no client parses.
 */
export const END_OF_DATES = Date.UTC(10_000, 0, 1);

/** The first tick strictly after `after` (ms), within the spec's start and end dates; undefined when there is none. */
export function nextTickAfter(spec: ScheduleSpec, anchorAt: string, after: number): number | undefined {
  const start = spec.startAt === undefined ? -Infinity : Date.parse(spec.startAt);
  const end = Math.min(spec.endAt === undefined ? Infinity : Date.parse(spec.endAt), END_OF_DATES);
  const t = gridAfter(spec.trigger, Date.parse(anchorAt), Math.max(after, start - 1));
  return t === undefined || t >= end ? undefined : t;
}

/** Is `tickAt` one of the spec's ticks? */
export const isTick = (spec: ScheduleSpec, anchorAt: string, tickAt: string): boolean => {
  const t = Date.parse(tickAt);
  return nextTickAfter(spec, anchorAt, t - 1) === t;
};

/** Up to `n` ticks strictly after `after`. */
export function ticksAfter(spec: ScheduleSpec, anchorAt: string, after: number, n: number): number[] {
  const out: number[] = [];
  for (let t = nextTickAfter(spec, anchorAt, after); t !== undefined && out.length < n; t = nextTickAfter(spec, anchorAt, t)) out.push(t);
  return out;
}

/**
 * A tick's jitter: the same on every executor (a hash of the schedule and the tick), from 0
 * to `jitterMs` - 1, so all of them agree when it is due.
 */
export function jitterOf(scheduleId: string, tickAt: number, jitterMs: number): number {
  if (jitterMs <= 0) return 0;
  const h = createHash('sha256').update(`${scheduleId}@${tickAt}`).digest();
  return h.readUInt32BE(0) % jitterMs;
}
