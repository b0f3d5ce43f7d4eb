// graphql-js refuses a variable's value before any resolver runs (`Variable "$inputs" got invalid
// value 1.5 at "inputs[0].priority"; Int cannot represent non-integer value: 1.5`), with no code:
// a client could not tell it from a server fault, and the typed client made it an untyped
// BatonApiError. This plugin gives each such error the shape of every other refusal:
// BAD_USER_INPUT, its place named as ours are (`inputs.0.priority`), `argument` and `problems`.
import type { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { codedError } from './errors.ts';

/** The place and reason of a variable refusal, or undefined for any other message. */
export function variableProblem(message: string): { path: string; message: string } | undefined {
  const at = /^Variable "\$[^"]+" got invalid value .*? at "([^"]+)"; (.+)$/s.exec(message);
  if (at) return { path: at[1]!.replace(/\[(\d+)\]/g, '.$1'), message: at[2]! };
  const whole = /^Variable "\$([^"]+)" got invalid value .*?; (.+)$/s.exec(message);
  return whole ? { path: whole[1]!, message: whole[2]! } : undefined;
}

const recoded = (e: GraphQLError): GraphQLError => {
  if (e.extensions?.['code'] !== undefined) return e;
  const p = variableProblem(e.message);
  return p ? codedError('BAD_USER_INPUT', `${p.path}: ${p.message}`, { argument: p.path, problems: [p] }, e) : e;
};

export function useVariableProblems(): Plugin {
  return {
    onExecutionResult({ result, setResult }) {
      if (!result || Symbol.asyncIterator in result || Array.isArray(result)) return;
      const errors = result.errors as readonly GraphQLError[] | undefined;
      if (errors?.some((e) => recoded(e) !== e)) setResult({ ...result, errors: errors.map(recoded) });
    },
  };
}
