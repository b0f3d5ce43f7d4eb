// graphql-js refuses some values before any resolver runs, naming no argument: a variable's value
// (`Variable "$inputs" got invalid value 1.5 at "inputs[0].priority"; Int cannot represent
// non-integer value: 1.5`, with no code, so a client could not tell it from a server fault) and a
// literal the Long or DateTime scalar refuses (`Long must be a whole number …`, found in
// validation), or one graphql's own Int, Boolean or enums refuse (`Int cannot represent non 32-bit
// signed integer value: 2147483648`, where the same value as a variable named its argument). This plugin gives each the shape of every other refusal: BAD_USER_INPUT, the
// message starting with the argument's place (`inputs.0.priority: …`, `fromRevision: …`,
// `filter.since: …`), and `argument` and `problems` in extensions.
import type { DocumentNode, GraphQLError } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { argumentPathOfVariable, placeOfNode } from './argument-places.ts';
import { codedError } from './errors.ts';
import { scalarRefusalOf } from './scalars.ts';

/** graphql's words for a literal of the wrong type (ValuesOfCorrectTypeRule). */
const LITERAL_REFUSAL = /^(Int|Float|String|Boolean|ID) cannot represent |^Expected value of type |^Value .* does not exist in ".*" enum/s;

/** The place and reason of a variable refusal, or undefined for any other message. */
export function variableProblem(message: string): { path: string; message: string } | undefined {
  const at = /^Variable "\$[^"]+" got invalid value .*? at "([^"]+)"; (.+)$/s.exec(message);
  if (at) return { path: at[1]!.replace(/\[(\d+)\]/g, '.$1'), message: at[2]! };
  const whole = /^Variable "\$([^"]+)" got invalid value .*?; (.+)$/s.exec(message);
  return whole ? { path: whole[1]!, message: whole[2]! } : undefined;
}

/** The refusal of `original` named by `path`; its HTTP status (400 before any execution) is kept. */
function refusal(path: string, message: string, original: GraphQLError, located: GraphQLError = original): GraphQLError {
  const http = original.extensions?.['http'];
  return codedError('BAD_USER_INPUT', `${path}: ${message}`, { argument: path, problems: [{ path, message }], ...(http !== undefined && { http }) }, located);
}

/** `e` named by its place, or `e` itself when it is no refusal of a value (or its place is not known). */
function recoded(e: GraphQLError, document: DocumentNode | undefined): GraphQLError {
  const scalar = scalarRefusalOf(e);
  if (scalar?.node) {
    // A literal in the query text. graphql may report the scalar's own error, which has no location.
    const place = document && placeOfNode(document, scalar.node);
    return place ? refusal(place, scalar.problem, e, e.nodes?.length ? e : createGraphQLError(e.message, { nodes: [scalar.node] })) : e;
  }
  if (!scalar && e.nodes?.length === 1 && LITERAL_REFUSAL.test(e.message)) {
    const place = document && placeOfNode(document, e.nodes[0]!);
    if (place) return refusal(place, e.message, e);
  }
  if (e.extensions?.['code'] !== undefined && !scalar) return e;
  const p = variableProblem(e.message);
  if (!p) return e;
  return refusal(document ? argumentPathOfVariable(document, p.path) : p.path, scalar?.problem ?? p.message, e);
}

export function useInputProblems(): Plugin {
  // Each request's parsed document, by its context (the same object from parse to result).
  const documents = new WeakMap<object, DocumentNode>();
  return {
    onParse: ({ context }) =>
      ({ result }) => {
        if (result && !(result instanceof Error)) documents.set(context, result as DocumentNode);
      },
    onExecutionResult({ result, setResult, context }) {
      if (!result || Symbol.asyncIterator in result || Array.isArray(result)) return;
      const errors = result.errors as readonly GraphQLError[] | undefined;
      if (!errors) return;
      const document = documents.get(context);
      const named = errors.map((e) => recoded(e, document));
      if (named.some((e, i) => e !== errors[i])) setResult({ ...result, errors: named });
    },
  };
}
