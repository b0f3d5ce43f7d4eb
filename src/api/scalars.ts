// The schema's custom scalars: JSON (any value), DateTime (ISO 8601 strings with a zone) and
// Long (integers up to 2^53: counters outgrow GraphQL's 32-bit Int within days at full load).
// What a JSON or DateTime argument may hold (storable JSON, years 0001 to 9999) is checked by
// argument-rules.ts, which knows the argument's name to put in the error. A value the scalar
// itself refuses is refused by graphql before any resolver runs, with no argument named:
// input-problems.ts names it from what scalarRefusalOf keeps of the refusal.
import { GraphQLScalarType, Kind, valueFromASTUntyped, type GraphQLError, type ValueNode } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { parseDateTime, whyNotADateTime } from '../input/rules.ts';

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

function parseDateTimeValue(value: unknown, node?: ValueNode): string {
  const iso = parseDateTime(value);
  if (iso === undefined) throw refuse('DateTime', whyNotADateTime(value), node);
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
