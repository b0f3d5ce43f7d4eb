// graphql-js parses a document recursively, one call chain per bracket level, so a query of a
// few thousand nested `[` overflows the stack (RangeError, answered "Unexpected error.") before
// armor's token limit stops it. This plugin measures the nesting of `{ [ (` with a flat scan of
// the text, skipping strings, block strings and comments as graphql's lexer does, and refuses a
// document nested deeper than MAX_QUERY_NESTING before the parser sees it.
import { Source } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

/**
 * Levels of `{`, `[` and `(` a document may nest. Real queries need about 10; a JSON literal
 * argument may hold 100 levels (the input rules' limit, which then names the place). Far below
 * the depth at which the parser overflows a cold stack (past 1,000).
 */
export const MAX_QUERY_NESTING = 200;

const OPENERS = new Set(['{', '[', '(']);
const CLOSERS = new Set(['}', ']', ')']);

/** The offset of the first bracket nested deeper than `max` levels, or undefined. */
export function tooDeepAt(body: string, max = MAX_QUERY_NESTING): number | undefined {
  let depth = 0;
  let i = 0;
  while (i < body.length) {
    const c = body[i]!;
    if (c === '#') {
      // A comment runs to the end of its line.
      while (i < body.length && body[i] !== '\n' && body[i] !== '\r') i++;
    } else if (body.startsWith('"""', i)) {
      // A block string ends at the next `"""` not escaped as `\"""`.
      i += 3;
      while (i < body.length && !body.startsWith('"""', i)) i += body.startsWith('\\"""', i) ? 4 : 1;
      i += 3;
    } else if (c === '"') {
      // A string ends at its closing quote, or (unterminated, which the parser refuses) at the line's end.
      i++;
      while (i < body.length && body[i] !== '"' && body[i] !== '\n' && body[i] !== '\r') i += body[i] === '\\' ? 2 : 1;
      i++;
    } else {
      if (OPENERS.has(c) && ++depth > max) return i;
      if (CLOSERS.has(c) && depth > 0) depth--;
      i++;
    }
  }
  return undefined;
}

/** Refuses an over-nested document before parsing: BAD_USER_INPUT (HTTP 400) with its place in the query. */
export function useQueryNestingLimit(max = MAX_QUERY_NESTING): Plugin {
  return {
    onParse({ params }) {
      const given = params.source;
      const at = tooDeepAt(typeof given === 'string' ? given : given.body, max);
      if (at === undefined) return;
      // `source` and `positions` give the error its line and column.
      throw createGraphQLError(`the query nests brackets ({, [ and ( together) deeper than ${max} levels: nest less deeply`, {
        source: typeof given === 'string' ? new Source(given) : given,
        positions: [at],
        extensions: { code: 'BAD_USER_INPUT', limit: true, http: { status: 400 } },
      });
    },
  };
}
