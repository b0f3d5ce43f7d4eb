// The input rules (src/input) applied to every argument of the schema by its type, before any
// resolver runs, so a new argument is covered the day it is added: String and ID are text
// (no NUL, no lone surrogate, at most MAX_TEXT_LENGTH characters), JSON is storable JSON (depth,
// size, text rules for every string and key; checked without recursion), DateTime is within
// years 0001 to 9999. Inside input objects and lists too: the error names the place,
// `filter.since: …`, `input.a.b: …`. Any argument or field named `namespace` is a namespace
// name (src/input/namespace.ts). Resolvers then apply each argument's own limits.
import {
  defaultFieldResolver,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLList,
  type GraphQLNonNull,
  type GraphQLObjectType,
  type GraphQLSchema,
} from 'graphql';
import { under, type InputProblem } from '../input/errors.ts';
import { namespaceProblem } from '../input/namespace.ts';
import { dateTimeRangeProblem, jsonProblems, textProblem } from '../input/rules.ts';
import { ApiError } from './errors.ts';

// graphql can be loaded twice (ESM for our code, CJS for yoga's: see errors.ts), so its
// instanceof-based isObjectType() and friends refuse the schema yoga built; the tag does not.
const tag = (t: unknown) => (t as { [Symbol.toStringTag]?: string })[Symbol.toStringTag];
const isNonNullType = (t: GraphQLInputType): t is GraphQLNonNull<GraphQLInputType> => tag(t) === 'GraphQLNonNull';
const isListType = (t: GraphQLInputType): t is GraphQLList<GraphQLInputType> => tag(t) === 'GraphQLList';
const isInputObjectType = (t: GraphQLInputType): t is GraphQLInputObjectType => tag(t) === 'GraphQLInputObjectType';
const isObjectType = (t: unknown): t is GraphQLObjectType => tag(t) === 'GraphQLObjectType';
const namedType = (t: GraphQLInputType): GraphQLInputType => (isNonNullType(t) || isListType(t) ? namedType(t.ofType) : t);

// Problems reported at most: a batch with a systematic mistake would otherwise repeat it per item.
const MAX_PROBLEMS = 10;

/**
 * Arguments the field's resolver checks among every other problem of the request, by the same
 * rules: refused here alone, one hid the rest (a `namespace` hid `cron` or `action`; a NUL in the
 * definition hid an unknown field of it; one item's bad namespace hid every other item's problems).
 */
const CHECKED_WITH_THE_REST = new Map([
  ['Mutation.createSchedule', new Set(['namespace'])],
  ['Mutation.updateSchedule', new Set(['namespace'])],
  ['Mutation.submitWorkflow', new Set(['namespace', 'definition', 'id'])],
  // The submission check (src/runtime/submission.ts) checks every field of every item by these rules, and each item's namespace.
  ['Mutation.submitExecution', new Set(['action', 'input', 'idempotencyKey', 'tags', 'namespace'])],
  ['Mutation.submitExecutions', new Set(['inputs'])],
]);

/** A problem and the argument (or input field) whose value has it: `input` for `input.a.b`. */
type ArgumentProblem = InputProblem & { argument: string };

/** Every problem of `value` (up to MAX_PROBLEMS), each named by its place: a batch's items are all checked, not only the first bad one. */
function checkValue(type: GraphQLInputType, value: unknown, path: string, problems: ArgumentProblem[]): void {
  if (value === null || value === undefined || problems.length >= MAX_PROBLEMS) return;
  if (isNonNullType(type)) return checkValue(type.ofType, value, path, problems);
  if (isListType(type)) {
    if (Array.isArray(value)) value.forEach((item, i) => checkValue(type.ofType, item, `${path}.${i}`, problems));
    return;
  }
  if (isInputObjectType(type)) {
    for (const field of Object.values(type.getFields())) checkValue(field.type, (value as Record<string, unknown>)[field.name], `${path}.${field.name}`, problems);
    return;
  }
  switch (type.name) {
    case 'String':
    case 'ID': {
      // An argument or input field called `namespace`, wherever it is, is a namespace name.
      const problem = textProblem(value) ?? (path === 'namespace' || path.endsWith('.namespace') ? namespaceProblem(value) : undefined);
      if (problem) problems.push({ path, message: problem, argument: path });
      return;
    }
    case 'DateTime': {
      const problem = dateTimeRangeProblem(value as string); // the scalar made it ISO 8601 in UTC
      if (problem) problems.push({ path, message: problem, argument: path });
      return;
    }
    case 'JSON': {
      problems.push(...under(path, jsonProblems(value)).map((p) => ({ ...p, argument: path })));
      return;
    }
  }
}

const CHECKED_SCALARS = new Set(['String', 'ID', 'DateTime', 'JSON']);

/** Whether any value of `type` holds a scalar these rules check. */
function holdsChecked(type: GraphQLInputType, seen = new Set<string>()): boolean {
  const named = namedType(type);
  if (tag(named) === 'GraphQLScalarType') return CHECKED_SCALARS.has((named as { name: string }).name);
  if (!isInputObjectType(named) || seen.has(named.name)) return false;
  seen.add(named.name);
  return Object.values(named.getFields()).some((f) => holdsChecked(f.type, seen));
}

function checkArguments(args: readonly GraphQLArgument[], values: Record<string, unknown>): void {
  const problems: ArgumentProblem[] = [];
  for (const arg of args) checkValue(arg.type, values[arg.name], arg.name, problems);
  if (problems.length === 0) return;
  const shown = problems.slice(0, MAX_PROBLEMS).map(({ path, message }) => ({ path, message }));
  // `argument`: the value at fault (`inputs.0.input`); for several, the first one's top-level argument (`inputs`).
  const argument = new Set(problems.map((p) => p.argument)).size === 1 ? problems[0]!.argument : problems[0]!.argument.split('.')[0]!;
  throw new ApiError('BAD_USER_INPUT', shown.map((p) => `${p.path}: ${p.message}`).join('; '), argument, { problems: shown });
}

/** Wraps the resolver (and subscribe) of every field with arguments to check, in place. */
export function applyArgumentRules(schema: GraphQLSchema): GraphQLSchema {
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields()) as GraphQLField<unknown, unknown>[]) {
      const args = field.args.filter((a) => holdsChecked(a.type) && !CHECKED_WITH_THE_REST.get(`${type.name}.${field.name}`)?.has(a.name));
      if (args.length === 0) continue;
      const resolve = field.resolve ?? defaultFieldResolver;
      field.resolve = (source, values, ctx, info) => {
        checkArguments(args, values);
        return resolve(source, values, ctx, info);
      };
      const subscribe = field.subscribe;
      if (subscribe) {
        field.subscribe = (source, values, ctx, info) => {
          checkArguments(args, values);
          return subscribe(source, values, ctx, info);
        };
      }
    }
  }
  return schema;
}
