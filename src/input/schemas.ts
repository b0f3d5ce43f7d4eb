// The rules as zod schemas, for the event catalog (schemas/) and action input schemas: text
// Postgres can store, JSON checked without recursion (zod's own z.json() recurses, and 5,000
// nested arrays overflow the stack), date-times in years 0001 to 9999. And zod's issues as
// problems with paths, where an unknown field says which known one was probably meant.
import { z } from 'zod';
import { unknownNameMessage } from './nearest.ts';
import { JSON_LIMITS, dateTimeValueProblem, formatPath, jsonProblems, textContentProblem, type Json, type JsonLimits } from './rules.ts';

/** A string Postgres can store: no NUL, no lone surrogate. Chain .min()/.max() as usual. */
export const text = () =>
  z.string().superRefine((s, ctx) => {
    const problem = textContentProblem(s);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** Any JSON value Baton can store (see jsonProblems): use instead of z.json(). */
export const jsonValue = (limits: JsonLimits = JSON_LIMITS): z.ZodType<Json> =>
  z.custom<Json>(() => true).superRefine((value, ctx) => {
    for (const p of jsonProblems(value, limits)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
  });

/** An ISO 8601 date-time with a zone, years 0001 to 9999. */
/**
 * `record` (a z.record), refusing an own `__proto__` key (JSON.parse makes one) with `message`
 * where zod's record would silently drop it: assigning it sets the built object's prototype.
 */
export const withoutProtoKey = <T extends z.ZodType>(record: T, message: string) =>
  z.preprocess((value, ctx) => {
    if (typeof value === 'object' && value !== null && Object.hasOwn(value, '__proto__')) ctx.addIssue({ code: 'custom', path: ['__proto__'], message });
    return value;
  }, record);

/** withoutProtoKey's message for a record whose keys are `what`. */
export const protoKeyRefusal = (what: string) => `"__proto__" cannot be ${what}: JavaScript reads it as an object's prototype, not as a key`;

export const dateTime = () =>
  z.string().superRefine((s, ctx) => {
    const problem = dateTimeValueProblem(s);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export interface Problem {
  /** Dotted (`steps.1.dependsOn`); '' for the value itself. */
  path: string;
  message: string;
}

type Def = { type: string; shape?: Record<string, z.ZodType>; element?: z.ZodType; innerType?: z.ZodType; in?: z.ZodType; valueType?: z.ZodType };
const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;

/** The field names of the object `schema` describes at `path`, or [] when it is no object there. */
export function knownFieldsAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let s: z.ZodType | undefined = schema;
  let i = 0;
  while (s) {
    const def = defOf(s);
    if (['optional', 'nullable', 'default', 'prefault', 'catch', 'readonly', 'nonoptional'].includes(def.type)) s = def.innerType;
    else if (def.type === 'pipe') s = def.in;
    else if (i === path.length) return def.type === 'object' ? Object.keys(def.shape ?? {}) : [];
    else if (def.type === 'object') s = def.shape?.[String(path[i++])];
    else if (def.type === 'array') (s = def.element), i++;
    else if (def.type === 'record') (s = def.valueType), i++;
    else return [];
  }
  return [];
}

/**
 * zod's issues as problems, one per unknown field (`steps.1.after: unknown field; did you mean
 * "dependsOn"?`) when `schema` is given to name the known ones; `aliases` map words people use
 * to the field they meant.
 */
export function zodProblems(error: z.ZodError, schema?: z.ZodType, aliases: Readonly<Record<string, string>> = {}): Problem[] {
  return error.issues.flatMap((issue) => {
    const at = issue.path.map((k) => (typeof k === 'symbol' ? String(k) : k));
    if (issue.code === 'unrecognized_keys') {
      const known = schema ? knownFieldsAt(schema, issue.path) : [];
      return issue.keys.map((key) => ({ path: formatPath([...at, key]), message: unknownNameMessage('field', key, known, aliases) }));
    }
    return [{ path: formatPath(at), message: issue.message }];
  });
}
