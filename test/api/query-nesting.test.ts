// A query document nested thousands of brackets deep overflowed graphql-js's recursive parser
// (through armor's token-limit parser): `RangeError: Maximum call stack size exceeded`, answered
// 500 INTERNAL_SERVER_ERROR "Unexpected error.". Every depth past MAX_QUERY_NESTING is now
// refused before parsing as BAD_USER_INPUT (HTTP 400) with its place in the query. The deepest
// cases run first, against a server whose parser is still cold (unoptimised frames are larger,
// so that is where the old code overflowed soonest).
import { describe, expect, it } from 'vitest';
import { MAX_QUERY_NESTING, tooDeepAt } from '../../src/api/query-nesting.ts';
import { gql, useApi, type GqlResponse } from './api-harness.ts';

const api = useApi();

// `mutation {` and `submitExecution(` are the first two levels.
const nestedList = (n: number) => `mutation { submitExecution(action: "core.echo", input: ${'['.repeat(n)}${']'.repeat(n)}) { executionId } }`;
const nestedObject = (n: number) => `mutation { submitExecution(action: "core.echo", input: ${'{a: '.repeat(n)}1${'}'.repeat(n)}) { executionId } }`;
const nestedSelection = (n: number) => `{${' a {'.repeat(n)} b${' }'.repeat(n)} }`;

function expectTooDeep(r: GqlResponse): void {
  expect(r.status, r.text).toBe(400);
  expect(r.errors, r.text).toHaveLength(1);
  const [e] = r.errors!;
  expect(e!.message).toBe(`the query nests brackets ({, [ and ( together) deeper than ${MAX_QUERY_NESTING} levels: nest less deeply`);
  expect(e!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', limit: true });
  expect((e as { locations?: unknown }).locations).toHaveLength(1);
}

describe('deeply nested query documents', () => {
  it('10,000 and 2,500 nested lists, objects and selections are refused, not a stack overflow', async () => {
    for (const depth of [10_000, 2_500, 1_000, MAX_QUERY_NESTING]) {
      for (const query of [nestedList(depth), nestedObject(depth), nestedSelection(depth)]) expectTooDeep(await gql(api().url, query));
    }
  });

  it('refuses at the first bracket past the limit, naming its line and column', async () => {
    const r = await gql(api().url, `\n${nestedList(MAX_QUERY_NESTING - 1)}`);
    expectTooDeep(r);
    const column = 'mutation { submitExecution(action: "core.echo", input: '.length + (MAX_QUERY_NESTING - 1);
    expect((r.errors![0] as { locations?: unknown }).locations).toEqual([{ line: 2, column }]);
  });

  it('up to the limit, the input rules still name the place of a too deep JSON literal', async () => {
    const r = await gql(api().url, nestedList(MAX_QUERY_NESTING - 2));
    expect(r.errors![0]!.message, r.text).toMatch(/^input\.0\.0\.0.*: nested deeper than 100 levels/);
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input' });
    const ok = await gql(api().url, nestedList(100));
    expect(ok.errors, ok.text).toBeUndefined();
  });

  it('brackets inside strings, block strings and comments do not count', async () => {
    const deep = '['.repeat(5_000);
    const r = await gql(api().url, `# ${deep}\nmutation { submitExecution(action: "core.echo", input: { s: "${deep}\\"${deep}", b: """${deep}\\"""${deep}""" }) { executionId } }`);
    expect(r.errors, r.text).toBeUndefined();
  });
});

describe('tooDeepAt', () => {
  it('follows graphql’s lexer: escapes in strings and block strings, comments to the end of the line', () => {
    expect(tooDeepAt('{ [ [ ] ] }', 3)).toBeUndefined();
    expect(tooDeepAt('{ [ [ [ ] ] ] }', 3)).toBe(6);
    expect(tooDeepAt('{ ( [ ] ) }', 2)).toBe(4);
    expect(tooDeepAt('"\\"[[[" [', 1)).toBeUndefined();
    expect(tooDeepAt('"""\\"""[[[""" [', 1)).toBeUndefined();
    expect(tooDeepAt('# [[[\n[', 1)).toBeUndefined();
    expect(tooDeepAt('# [[[\r[[', 1)).toBe(7);
    // An unterminated string ends at its line, as the lexer's does; what follows counts.
    expect(tooDeepAt('"[[\n[[', 1)).toBe(5);
    // Closers without openers do not lend depth.
    expect(tooDeepAt(']]]] [[', 1)).toBe(6);
  });
});
