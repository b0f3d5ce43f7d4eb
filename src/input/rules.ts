// The rules every value from outside passes before Baton stores it or queries with it: the
// GraphQL API's arguments, the CLI's options, the library's submissions and the event catalog
// (schemas/) all check with these, so a value one door accepts is one every other door and
// Postgres accept too. Pure (no I/O, no zod), so the catalog can build on it.
//
// What Postgres refuses, and so what these refuse first:
// - a NUL character in text or JSON (22021 / 22P05: text cannot hold \u0000);
// - a lone UTF-16 surrogate (22P02: not valid UTF-8 once encoded);
// - a timestamp in year 0 or beyond 9999 as JavaScript writes it (22008: "0000-…", "+010000-…");
// - an integer beyond bigint (22003).
// And what would take a process down: JSON nested so deep that a recursive walk overflows the
// stack (5,000 nested arrays fit in 10 KB), or so large it fills memory.

/** Limits of a JSON value: nesting depth and approximate size. */
export interface JsonLimits {
  /** Arrays and objects inside each other; the root array or object is level 1. */
  maxDepth: number;
  /** UTF-8 bytes of its strings and keys plus one byte per value: about its size as JSON text. */
  maxBytes: number;
  /**
   * Refuse whole numbers past ±2^53 − 1: JSON text such as 12345678901234567891 was already read
   * as the nearest double (12345678901234567000), so storing it would silently change it. For what
   * people send (a submission's input); not for what code returns (a result may hold 1e300).
   */
  exactIntegers?: boolean;
}

const INEXACT_INTEGER = `is a whole number past ±${Number.MAX_SAFE_INTEGER}, which JSON numbers cannot hold exactly (it may already have been rounded): send it as a string`;

/**
 * 100 levels: deeper than any real document (a workflow definition puts step inputs at level 3),
 * shallow enough for any recursive reader (JSON.stringify, zod, Postgres's jsonb parser).
 * 4 MiB: an http.request result is at most 1 MiB of body, which escaping can grow; inputs
 * through the API are bounded sooner by its 64 KiB request body.
 */
export const JSON_LIMITS: Readonly<JsonLimits> = Object.freeze({ maxDepth: 100, maxBytes: 4 * 1024 * 1024 });

/** Longest text argument of the API or option of the CLI that sets no lower limit of its own. */
export const MAX_TEXT_LENGTH = 10_000;

/** The date-times both Postgres and JavaScript read and write alike: years 0001 to 9999, in UTC. */
export const EARLIEST_DATE_TIME = '0001-01-01T00:00:00.000Z';
export const LATEST_DATE_TIME = '9999-12-31T23:59:59.999Z';

/**
 * Whether two JSON values are the same value: key order and prototypes aside (jsonb stores keys
 * in its own order; GraphQL builds literal objects without a prototype, which
 * util.isDeepStrictEqual counts as a difference). Recursive: for values within JSON_LIMITS' depth.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((v, i) => sameJson(v, (b as unknown[])[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Postgres's bigint: the largest cursor position or sequence number there can be. */
export const MAX_BIGINT = 9_223_372_036_854_775_807n;

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** What is wrong and where: `path` is relative to the value checked (`[]` is the value itself). */
export interface ValueProblem {
  path: (string | number)[];
  message: string;
}

const NUL = 'must not contain a NUL character (\\u0000)';
const LONE_SURROGATE = 'must not contain a lone UTF-16 surrogate (\\uD800-\\uDFFF without its pair)';

const isWellFormed = (s: string) => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** Why `s` cannot be stored as text (NUL, lone surrogate), or undefined when it can. */
export function textContentProblem(s: string): string | undefined {
  if (s.includes('\0')) return NUL;
  if (!isWellFormed(s)) return LONE_SURROGATE;
  return undefined;
}

/**
 * Why `value` is not acceptable text, or undefined: a string, storable, within `maxLength`
 * characters (MAX_TEXT_LENGTH by default); with `required`, not empty or only white space.
 */
export function textProblem(value: unknown, o: { maxLength?: number; required?: boolean } = {}): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  const content = textContentProblem(value);
  if (content) return content;
  const max = o.maxLength ?? MAX_TEXT_LENGTH;
  if (value.length > max) return `must be at most ${max} characters (got ${value.length})`;
  if (o.required && value.trim() === '') return 'must not be empty';
  return undefined;
}

/**
 * Text as it can be stored, for what Baton must record rather than refuse (an error message, a
 * stack): a NUL becomes U+FFFD, as does each lone surrogate.
 */
export function storableText(s: string): string {
  const noNul = s.includes('\0') ? s.replaceAll('\0', '\uFFFD') : s;
  return isWellFormed(noNul) ? noNul : (noNul as string & { toWellFormed(): string }).toWellFormed();
}

const isPlainObject = (v: object) => {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

function notJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : `${value} is not a JSON number`;
    case 'object':
      if (value === null || Array.isArray(value) || isPlainObject(value)) return undefined;
      return `a ${value.constructor?.name ?? 'non-plain object'} is not JSON (plain objects, arrays, strings, numbers, booleans and null are)`;
    default:
      return `${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`} is not JSON`;
  }
}

/**
 * Every problem of `value` as JSON Baton can store, walked iteratively (no recursion, so depth
 * cannot overflow the stack): only JSON types, text rules for every string and key, at most
 * `maxDepth` levels and about `maxBytes` in size. Stops at the first depth, cycle or size
 * problem (they make the rest meaningless) and after `maxProblems` others. A getter or Proxy
 * trap that throws is a problem where it is, never an exception.
 */
export function jsonProblems(value: unknown, limits: JsonLimits = JSON_LIMITS, maxProblems = 10): ValueProblem[] {
  return walkJson(value, limits, maxProblems, false).problems;
}

/**
 * What code returned (an action's result, its progress details) as the JSON to store, built in
 * the same walk as jsonProblems checks it (so each getter runs once, and a later change to the
 * value does not reach the copy), or its first problem. Never changed on the way: what JSON
 * cannot hold (NaN, a Map, a Uint8Array, a function, a cycle) is refused, not turned into
 * something else. As JSON.stringify, it honours a value's own toJSON (a Date becomes its ISO
 * text: that is how the value says it is written; an invalid Date, whose toJSON gives null, is
 * refused), and an object's property holding undefined is absent, as to any reader of it.
 */
export function returnedJson(value: unknown, limits: JsonLimits = JSON_LIMITS): { json: Json; problem?: undefined } | { json?: undefined; problem: ValueProblem } {
  const walked = walkJson(value, limits, 1, true);
  return walked.problems.length > 0 ? { problem: walked.problems[0]! } : { json: walked.json as Json };
}

/** A value being walked: where it sits (its key in its container's entry) and, when copying, the copy of that container. */
interface Walked {
  value: unknown;
  key: string | number;
  parent: Walked | undefined;
  /** Containers it is in. */
  depth: number;
  /** Its toJSON has been called (JSON.stringify calls it once per place). */
  converted: boolean;
  into: Record<string, unknown> | unknown[] | undefined;
}

/** Where `w` is, from the top (paths are built only for problems, not for every value walked). */
function pathOf(w: Walked): (string | number)[] {
  const path: (string | number)[] = [];
  for (let at: Walked | undefined = w; at?.parent; at = at.parent) path.push(at.key);
  return path.reverse();
}

/** At a depth problem: the shallowest place that holds a container it is already inside, if any. */
function cycleAt(w: Walked): ValueProblem | undefined {
  const chain: Walked[] = [];
  for (let at: Walked | undefined = w; at; at = at.parent) chain.push(at);
  const seen = new Map<unknown, Walked>();
  for (const at of chain.reverse()) {
    const earlier = seen.get(at.value);
    if (earlier) {
      const where = earlier.parent ? `the value at ${formatPath(pathOf(earlier))}` : 'the whole value';
      return { path: pathOf(at), message: `is ${where} again (a cycle), which JSON cannot hold` };
    }
    seen.set(at.value, at);
  }
  return undefined;
}

/** Why reading a value threw, as text; total (the thrown value may be as hostile as the one read). */
function thrownText(err: unknown): string {
  try {
    return printable(err instanceof Error ? String(err.message) : String(err), 200);
  } catch {
    return 'something that cannot be shown either';
  }
}

const hasToJSON = (v: unknown): v is { toJSON(key: string): unknown } =>
  ((typeof v === 'object' && v !== null) || typeof v === 'bigint') && typeof (v as { toJSON?: unknown }).toJSON === 'function';

function put(w: Walked, value: unknown, holder: { json?: unknown }): void {
  if (!w.into) holder.json = value;
  // An own "__proto__" key (JSON.parse makes one) must stay a key, not become the prototype.
  else if (w.key === '__proto__') Object.defineProperty(w.into, w.key, { value, enumerable: true, writable: true, configurable: true });
  else (w.into as Record<string, unknown>)[w.key] = value;
}

function walkJson(value: unknown, limits: JsonLimits, maxProblems: number, returned: boolean): { problems: ValueProblem[]; json?: unknown } {
  const problems: ValueProblem[] = [];
  const holder: { json?: unknown } = {};
  const stack: Walked[] = [{ value, key: '', parent: undefined, depth: 0, converted: false, into: undefined }];
  let bytes = 0;
  walk: while (stack.length > 0 && problems.length < maxProblems) {
    const w = stack.pop()!;
    try {
      if (returned && !w.converted && hasToJSON(w.value)) {
        if (w.value instanceof Date && Number.isNaN(w.value.getTime())) {
          problems.push({ path: pathOf(w), message: 'an invalid Date is not JSON (its toJSON gives null)' });
          continue;
        }
        w.value = w.value.toJSON(String(w.key));
        w.converted = true;
      }
      const v = w.value;
      const wrong = notJson(v);
      if (wrong) {
        problems.push({ path: pathOf(w), message: wrong });
        continue;
      }
      if (typeof v === 'string') {
        const content = textContentProblem(v);
        if (content) problems.push({ path: pathOf(w), message: content });
        bytes += Buffer.byteLength(v) + 2;
        if (returned) put(w, v, holder);
      } else if (typeof v === 'object' && v !== null) {
        if (w.depth + 1 > limits.maxDepth) {
          // A cycle is infinitely deep: say so, where it closes, rather than where the depth ran out.
          return { problems: [...problems, cycleAt(w) ?? { path: pathOf(w), message: `nested deeper than ${limits.maxDepth} levels of arrays and objects` }] };
        }
        bytes += 2;
        const depth = w.depth + 1;
        if (Array.isArray(v)) {
          // Every element is at least one byte more: a huge array is refused before it is walked.
          bytes += v.length;
          if (bytes + v.length > limits.maxBytes) return { problems: [...problems, { path: [], message: `larger than ${limits.maxBytes} bytes as JSON` }] };
          const into = returned ? new Array<unknown>(v.length) : undefined;
          if (returned) put(w, into, holder);
          for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], key: i, parent: w, depth, converted: false, into });
        } else {
          const into = returned ? {} : undefined;
          if (returned) put(w, into, holder);
          const keys = Object.keys(v);
          const children: Walked[] = [];
          for (const key of keys) {
            const child: Walked = { value: undefined, key, parent: w, depth, converted: false, into };
            try {
              child.value = (v as Record<string, unknown>)[key];
            } catch (err) {
              problems.push({ path: pathOf(child), message: `could not be read: its getter threw: ${thrownText(err)}` });
              if (problems.length >= maxProblems) break walk;
              continue;
            }
            if (returned && child.value === undefined) continue;
            const content = textContentProblem(key);
            if (content) problems.push({ path: pathOf(child), message: `key ${content}` });
            bytes += Buffer.byteLength(key) + 4;
            if (bytes > limits.maxBytes) return { problems: [...problems, { path: [], message: `larger than ${limits.maxBytes} bytes as JSON` }] };
            children.push(child);
          }
          for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]!);
        }
      } else {
        if (limits.exactIntegers && typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) problems.push({ path: pathOf(w), message: INEXACT_INTEGER });
        bytes += String(v).length;
        if (returned) put(w, v, holder);
      }
    } catch (err) {
      // A Proxy trap, a toJSON or a constructor getter that throws.
      problems.push({ path: pathOf(w), message: `could not be read: it threw: ${thrownText(err)}` });
      continue;
    }
    if (bytes > limits.maxBytes) return { problems: [...problems, { path: [], message: `larger than ${limits.maxBytes} bytes as JSON` }] };
  }
  return { problems, json: holder.json };
}

const DATE_TIME_SHAPE = 'must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z';
const DATE_TIME_RANGE = `must be from ${EARLIEST_DATE_TIME} to ${LATEST_DATE_TIME} (years 0001 to 9999 in UTC)`;

/** The year of an ISO 8601 date-time with a zone whose date is in the calendar, or undefined. */
function dateTimeYear(value: unknown): number | undefined {
  if (typeof value !== 'string' || !ISO_DATE_TIME.test(value)) return undefined;
  // Date rolls 2026-02-30 over to March 2nd; a date that is not in the calendar is refused.
  const year = Number(value.slice(0, 4));
  const month = Number(value.slice(5, 7));
  const day = Number(value.slice(8, 10));
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]! ? year : undefined;
}

const DATE_PART = /^([+-]?\d+)-(\d{2})-(\d{2})T/;

/**
 * Why `value`, which parseDateTime refused, is no date-time: a year past 9999 or a day the calendar
 * lacks said as such (`not a real date: 2026-02 has no day 30`), else the shape wanted. Every door
 * says the same: the CLI's options, schedules' start and end, GraphQL's DateTime.
 */
export function whyNotADateTime(value: unknown): string {
  const date = typeof value === 'string' ? DATE_PART.exec(value) : null;
  if (!date) return DATE_TIME_SHAPE;
  const [, year, month, day] = date.map(Number) as [number, number, number, number];
  // `99999-01-01T…`: out of range (dateTimeRangeProblem says so of any year that is not 4 digits).
  if (!/^\d{4}$/.test(date[1]!)) return dateTimeRangeProblem(value as string) ?? DATE_TIME_SHAPE;
  if (month < 1 || month > 12) return `not a real date: there is no month ${date[2]}`;
  // Date rolls 2026-02-30 over to March 2nd (and reads years 0 to 99 as 19xx: hence setUTCFullYear).
  const real = new Date(Date.UTC(2000, month - 1, day));
  real.setUTCFullYear(year);
  if (day < 1 || real.getUTCDate() !== day) return `not a real date: ${date[1]}-${date[2]} has no day ${date[3]}`;
  return DATE_TIME_SHAPE;
}

/** An ISO 8601 date-time with a zone, in UTC with milliseconds as JavaScript writes it (any year), or undefined. */
export function parseDateTime(value: unknown): string | undefined {
  if (dateTimeYear(value) === undefined) return undefined;
  const t = new Date(value as string);
  return Number.isNaN(t.getTime()) ? undefined : t.toISOString();
}

/** Why a date-time from parseDateTime is outside years 0001 to 9999, or undefined. */
export function dateTimeRangeProblem(iso: string): string | undefined {
  // Years beyond 4 digits are written "+010000-…" (or "-000001-…"), which sort before digits.
  return /^\d{4}-/.test(iso) && iso >= EARLIEST_DATE_TIME && iso <= LATEST_DATE_TIME ? undefined : DATE_TIME_RANGE;
}

/** A date-time as Baton stores it (ISO 8601 in UTC with milliseconds, years 0001 to 9999), or the problem with it. */
export function dateTimeProblem(value: unknown): { iso: string } | { problem: string } {
  const iso = parseDateTime(value);
  if (iso === undefined) return { problem: whyNotADateTime(value) };
  const range = dateTimeRangeProblem(iso);
  return range ? { problem: range } : { iso };
}

/**
 * dateTimeProblem's verdict without the normalised value, for the event catalog, which checks
 * every event's times: only a date in year 0001 or 9999 can be moved out of range by its zone,
 * so only those pay for a Date (about 5 µs, against 0.3 µs for the rest).
 */
export function dateTimeValueProblem(value: unknown): string | undefined {
  const year = dateTimeYear(value);
  if (year === undefined) return DATE_TIME_SHAPE;
  if (year > 1 && year < 9999) return undefined;
  const r = dateTimeProblem(value);
  return 'problem' in r ? r.problem : undefined;
}

// YYYY-MM-DDTHH:MM[:SS[.fraction]] then Z or ±HH:MM (or ±HHMM): each form JavaScript's Date
// reads as written (it takes no ±HH alone); the calendar is checked in dateTimeYear.
const ISO_DATE_TIME = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)$/;

/** Why `value` is not a position (a whole number from 0 to Postgres's bigint maximum) written in decimal. */
export function bigintTextProblem(value: string): string | undefined {
  if (!/^\d{1,19}$/.test(value) || BigInt(value) > MAX_BIGINT) return `must be a whole number from 0 to ${MAX_BIGINT}`;
  return undefined;
}

/** Postgres's integer: GraphQL's Int, priorities. */
export const INT32 = { min: -2_147_483_648, max: 2_147_483_647 } as const;

/** Why `value` is not a whole number from `min` to `max`, or undefined. */
export function integerProblem(value: unknown, min: number, max: number): string | undefined {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    // A number in quotes ("5") from a JSON export says what it is, or the range reads as the problem.
    // 1.5 is inside the range: say what is wrong with it, as GraphQL's Int does.
    if (typeof value === 'number' && Number.isFinite(value) && !Number.isInteger(value) && value >= min && value <= max) return `must be a whole number from ${min} to ${max} (got ${value})`;
    const got = typeof value === 'number' ? ` (got ${value})` : ` (got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value === 'string' ? `the string ${JSON.stringify(value.slice(0, 20))}` : `a ${typeof value}`}: a whole number is wanted)`;
    return `must be from ${min} to ${max}${got}`;
  }
  return undefined;
}

/** A path for people: `a.b.0`, shortened in the middle when long, each key printable (escapes for what is not). */
export function formatPath(path: readonly (string | number)[]): string {
  const shown = path.length > 12 ? [...path.slice(0, 6), `…(${path.length - 9} more)…`, ...path.slice(-3)] : path;
  return shown.map((s) => (typeof s === 'number' ? String(s) : printable(s))).join('.');
}

/** Text safe to put in a message: control characters, lone surrogates, quotes and backslashes escaped; long text cut. */
export function printable(s: string, max = 60): string {
  const cut = s.length > max ? `${s.slice(0, max)}…` : s;
  return /[\x00-\x1f\x7f"\\]/.test(cut) || !isWellFormed(cut) ? JSON.stringify(cut).slice(1, -1) : cut;
}
