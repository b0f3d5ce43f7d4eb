// The schema's custom scalars: JSON (any value), DateTime (ISO 8601 strings with a zone) and
// Long (integers up to 2^53: counters outgrow GraphQL's 32-bit Int within days at full load).
// What a JSON or DateTime argument may hold (storable JSON, years 0001 to 9999) is checked by
// argument-rules.ts, which knows the argument's name to put in the error. A value the scalar
// itself refuses is refused by graphql before any resolver runs, with no argument named:
// input-problems.ts names it from what scalarRefusalOf keeps of the refusal.
import { GraphQLScalarType, Kind, valueFromASTUntyped, type GraphQLError, type ValueNode } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { dateTimeRangeProblem, parseDateTime } from '../input/rules.ts';

export interface ScalarRefusal {
  /** Why, without the place: `must be a whole number …`. */
  problem: string;
  /** The literal refused, when it was in the query text (not a variable). */
  node?: ValueNode;
}

const refusals = new WeakMap<object, ScalarRefusal>();

// Built by yoga's createGraphQLError so that yoga sees a client error, not an unexpected one,
// even where graphql is loaded twice (see errors.ts).
function refuse(scalar: string, problem: string, node?: ValueNode): GraphQLError {
  const error = createGraphQLError(`${scalar} ${problem}`, { extensions: { code: 'BAD_USER_INPUT' } });
  refusals.set(error, { problem, ...(node && { node }) });
  return error;
}

/** The Long or DateTime refusal `error` is or wraps (graphql wraps it once or twice), or undefined. */
export function scalarRefusalOf(error: unknown): ScalarRefusal | undefined {
  let e = error;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const refusal = refusals.get(e);
    if (refusal) return refusal;
    e = (e as { originalError?: unknown }).originalError;
  }
  return undefined;
}

export const JsonScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});

const DATE_TIME_SHAPE = 'must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z';
const DATE_PART = /^([+-]?\d+)-(\d{2})-(\d{2})T/;

/** Why `value` is no date-time: a year past 9999 or a day the calendar lacks said as such, not as a shape. */
function dateTimeValueProblem(value: unknown): string {
  const date = typeof value === 'string' ? DATE_PART.exec(value) : null;
  if (!date) return DATE_TIME_SHAPE;
  const [, year, month, day] = date.map(Number) as [number, number, number, number];
  // `99999-01-01T…`: out of range (rules.ts says so of any year that is not 4 digits).
  if (!/^\d{4}$/.test(date[1]!)) return dateTimeRangeProblem(value as string) ?? DATE_TIME_SHAPE;
  if (month < 1 || month > 12) return `not a real date: there is no month ${date[2]}`;
  // Date rolls 2026-02-30 over to March 2nd (and reads years 0 to 99 as 19xx: hence setUTCFullYear).
  const real = new Date(Date.UTC(2000, month - 1, day));
  real.setUTCFullYear(year);
  if (day < 1 || real.getUTCDate() !== day) return `not a real date: ${date[1]}-${date[2]} has no day ${date[3]}`;
  return DATE_TIME_SHAPE;
}

function parseDateTimeValue(value: unknown, node?: ValueNode): string {
  const iso = parseDateTime(value);
  if (iso === undefined) throw refuse('DateTime', dateTimeValueProblem(value), node);
  return iso;
}

export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  serialize: (value) => (value instanceof Date ? value.toISOString() : new Date(value as string).toISOString()),
  parseValue: (value) => parseDateTimeValue(value),
  parseLiteral: (ast) => parseDateTimeValue(ast.kind === Kind.STRING ? ast.value : undefined, ast),
});

function parseLong(value: unknown, node?: ValueNode): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw refuse('Long', 'must be a whole number between -(2^53 - 1) and 2^53 - 1', node);
  return value;
}

export const LongScalar = new GraphQLScalarType({
  name: 'Long',
  serialize: (value) => parseLong(typeof value === 'bigint' || typeof value === 'string' ? Number(value) : value),
  parseValue: (value) => parseLong(value),
  parseLiteral: (ast) => parseLong(ast.kind === Kind.INT ? Number(ast.value) : undefined, ast),
});
