// Tags: string key-values people attach to an execution to find it by their own business keys
// (`customer=c-42`), at submit and, from a running action, later. One set of rules for every
// door (GraphQL's `tags` and `filter.tags`, `baton submit --tag`, `baton list --tag`, an
// NDJSON line's `tags`, the event catalog), so a tag one door takes every other takes too.
// Pure and zod-free, like rules.ts.
import { printable, textProblem, type ValueProblem } from './rules.ts';

export type Tags = Record<string, string>;

/**
 * Keys are short names (`customerId`, `team.region`, `k8s/namespace`): they appear on command
 * lines (`--tag k=v`, so no `=`) and as JSON keys in filters. Values are any storable text.
 * 32 tags per execution (submitted and added together) keep the jsonb row and its GIN index
 * entries small: a business key or a few, not a document (that is what `input` is for).
 */
export const TAG_LIMITS = { maxTags: 32, keyLength: 64, valueLength: 256 } as const;

const KEY_SHAPE = /^[A-Za-z0-9_.:/-]+$/;

/** Why `key` is not a tag key, or undefined. */
export function tagKeyProblem(key: string): string | undefined {
  if (key.length === 0) return 'a tag key must not be empty';
  if (key.length > TAG_LIMITS.keyLength) return `a tag key must be at most ${TAG_LIMITS.keyLength} characters (got ${key.length})`;
  if (!KEY_SHAPE.test(key)) return `tag key "${printable(key, 40)}" may contain only letters, digits and _ . : / -`;
  // Assigning it sets an object's prototype, so every object built from the tags (zod's record
  // among them) silently dropped it. `constructor`, `prototype` and the like assign as any key.
  if (key === '__proto__') return 'tag key "__proto__" is reserved: JavaScript reads it as an object\'s prototype, not as a key; choose another name';
  return undefined;
}

/** Why `value` is not a tag value, or undefined. */
export function tagValueProblem(value: unknown): string | undefined {
  const problem = textProblem(value, { required: true, maxLength: TAG_LIMITS.valueLength });
  return problem && `a tag value ${problem}`;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && [Object.prototype, null].includes(Object.getPrototypeOf(v));

/**
 * Every problem of `value` as a set of tags (an object of string values), paths relative to it
 * (`["customer"]` for that tag's value). `maxTags` is how many it may hold (fewer when added to
 * tags an execution already has).
 */
export function tagsProblems(value: unknown, maxTags: number = TAG_LIMITS.maxTags): ValueProblem[] {
  if (!isPlainObject(value)) return [{ path: [], message: 'must be an object of tags, like {"customer": "c-42"}' }];
  const keys = Object.keys(value);
  if (keys.length > maxTags) return [{ path: [], message: `at most ${maxTags} tags (got ${keys.length})` }];
  const problems: ValueProblem[] = [];
  for (const key of keys) {
    const problem = tagKeyProblem(key) ?? tagValueProblem(value[key]);
    if (problem) problems.push({ path: [key], message: problem });
  }
  return problems;
}

/** `customer=c-42` (the first `=` splits; the value may hold more): the tag, or the problem with it. */
export function parseTagText(text: string): { key: string; value: string } | { problem: string } {
  const at = text.indexOf('=');
  if (at < 0) return { problem: `must be key=value, like customer=c-42 (got "${printable(text, 40)}")` };
  const key = text.slice(0, at);
  const value = text.slice(at + 1);
  const problem = tagKeyProblem(key) ?? tagValueProblem(value);
  return problem ? { problem } : { key, value };
}
