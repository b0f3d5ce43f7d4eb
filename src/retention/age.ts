// How old a finished execution must be before retention archives it: `90d`, `12h`, `30m`, `45s`
// (and `2w`). Between one second and 100 years: anything else is refused, naming the setting.
import { BatonError } from '../errors.ts';

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };
export const MAX_RETENTION_MS = 100 * 365 * 86_400_000;
/** The Cloacina seed's suggestion (docs/adr): keep finished work 90 days. */
export const SUGGESTED_RETENTION = '90d';

/** Milliseconds, or undefined when `text` is not an age in the accepted form and range. */
export function parseAge(text: string): number | undefined {
  const m = /^\s*(\d{1,9})\s*(s|m|h|d|w)\s*$/.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]) * UNITS[m[2]!]!;
  return ms >= 1_000 && ms <= MAX_RETENTION_MS ? ms : undefined;
}

export function ageOrThrow(text: string, what: string): number {
  const ms = parseAge(text);
  if (ms === undefined) throw new BatonError(`${what}: expected an age such as ${SUGGESTED_RETENTION}, 12h, 30m or 45s (at least 1s, at most 100 years), not ${JSON.stringify(text.slice(0, 40))}`);
  return ms;
}

export function formatAge(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
