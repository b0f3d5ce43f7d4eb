// The schema's custom scalars: JSON (any value), DateTime (ISO 8601 strings with a zone) and
// Long (integers up to 2^53: counters outgrow GraphQL's 32-bit Int within days at full load).
// What a JSON or DateTime argument may hold (storable JSON, years 0001 to 9999) is checked by
// argument-rules.ts, which knows the argument's name to put in the error.
import { GraphQLScalarType, Kind, valueFromASTUntyped } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { parseDateTime } from '../input/rules.ts';

// Built by yoga's createGraphQLError so that yoga sees a client error, not an unexpected one,
// even where graphql is loaded twice (see errors.ts).
const invalid = (message: string) => createGraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });

export const JsonScalar = new GraphQLScalarType({
  name: 'JSON',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});

function parseDateTimeValue(value: unknown): string {
  const iso = parseDateTime(value);
  if (iso === undefined) throw invalid('DateTime must be an ISO 8601 date-time with a time zone, like 2024-05-01T12:00:00Z');
  return iso;
}

export const DateTimeScalar = new GraphQLScalarType({
  name: 'DateTime',
  serialize: (value) => (value instanceof Date ? value.toISOString() : new Date(value as string).toISOString()),
  parseValue: parseDateTimeValue,
  parseLiteral: (ast) => parseDateTimeValue(ast.kind === Kind.STRING ? ast.value : undefined),
});

function parseLong(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw invalid('Long must be a whole number between -(2^53 - 1) and 2^53 - 1');
  return value;
}

export const LongScalar = new GraphQLScalarType({
  name: 'Long',
  serialize: (value) => parseLong(typeof value === 'bigint' || typeof value === 'string' ? Number(value) : value),
  parseValue: parseLong,
  parseLiteral: (ast) => parseLong(ast.kind === Kind.INT ? Number(ast.value) : undefined),
});
