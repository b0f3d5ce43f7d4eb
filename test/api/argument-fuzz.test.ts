// Property: whatever string, JSON or date-time a client puts in any argument of the schema, the
// API answers with a client error or data, never INTERNAL_SERVER_ERROR or a 5xx. The argument
// positions are enumerated from the SDL (inside input objects too, and on nested fields such as
// Execution.stateAt), so an argument added tomorrow is fuzzed without touching this file.
// Bounded: a fixed number of runs per position (a few seconds in all).
import fc from 'fast-check';
import {
  buildSchema,
  getNamedType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from 'graphql';
import fs from 'node:fs/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { SCHEMA_FILE } from '../../src/api/schema.ts';
import { useApi } from './api-harness.ts';

const api = useApi({}, { transport: {} });
const RUNS_PER_POSITION = 12;
const FUZZED_SCALARS = new Set(['String', 'ID', 'JSON', 'DateTime']);

/** A list position gets a list of hostile values. */
const valueFor = (type: GraphQLInputType, scalar: string): fc.Arbitrary<unknown> =>
  isNonNullType(type) ? valueFor(type.ofType, scalar) : isListType(type) ? fc.array(valueFor(type.ofType, scalar), { minLength: 1, maxLength: 3 }) : hostileValue(scalar);

/** One place a fuzzed value can go: `field(arg: …)` or `field(arg: { inner: … })`, reached from a root. */
interface Position {
  operation: 'query' | 'mutation' | 'subscription';
  /** Root field, then (for nested fields) the path of fields to it, each with its filled arguments. */
  route: { field: GraphQLField<unknown, unknown>; fixed: string }[];
  arg: GraphQLArgument;
  /** Inside an input object: the field path from the argument. */
  inner: string[];
  scalar: string;
}

// ---------------------------------------------------------------------------
// Hostile values

const specials = ['\u0000', '\uD800', '\uDFFF', '\uDBFF\uDFFF', '\u202E', '\uFEFF', '\u200B', '😀', 'é', 'e\u0301', '\\', '"', "'", '%', '_', '\n', '\r', '\t', '\u007F', '\u2028'];
const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: fc.oneof(fc.constantFrom(...specials), fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c))), maxLength: 40 }),
  fc.constantFrom("' OR '1'='1", '%00', '$1', '0000-01-01T00:00:00Z', '9999999999999999999', '-1', 'NaN', '', ' ', 'null'),
  fc.integer({ min: 1_000, max: 70_000 }).map((n) => 'x'.repeat(n)),
);
const deepJson = fc.tuple(fc.integer({ min: 90, max: 3_000 }), fc.boolean()).map(([depth, arrays]) => {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = arrays ? [v] : { k: v };
  return v;
});
const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  hostileString,
  fc.dictionary(hostileString, fc.oneof(hostileString, fc.integer())),
  fc.array(hostileString, { maxLength: 5 }),
  deepJson,
);
const hostileDateTime: fc.Arbitrary<string> = fc.oneof(
  hostileString,
  fc.tuple(fc.integer({ min: -300_000, max: 300_000 }), fc.integer({ min: 0, max: 13 }), fc.integer({ min: 0, max: 32 }), fc.constantFrom('Z', '+14:00', '-12:00', '')).map(([y, m, d, z]) => {
    const year = y >= 0 && y <= 9999 ? String(y).padStart(4, '0') : `${y < 0 ? '-' : '+'}${String(Math.abs(y)).padStart(6, '0')}`;
    return `${year}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}T00:00:00${z}`;
  }),
);
const hostileValue = (scalar: string): fc.Arbitrary<unknown> => (scalar === 'JSON' ? hostileJson : scalar === 'DateTime' ? hostileDateTime : hostileString);

// ---------------------------------------------------------------------------
// Positions, from the SDL

function inputPaths(type: GraphQLInputType, inner: string[] = [], seen = new Set<string>()): { inner: string[]; scalar: string }[] {
  const named = getNamedType(type);
  if (isScalarType(named)) return FUZZED_SCALARS.has(named.name) ? [{ inner, scalar: named.name }] : [];
  if (!isInputObjectType(named) || seen.has(named.name)) return [];
  return Object.values(named.getFields()).flatMap((f) => inputPaths(f.type, [...inner, f.name], new Set([...seen, named.name])));
}

let executionId: string;

/** A valid value for a required argument, as GraphQL literal text. */
function filler(arg: GraphQLArgument): string {
  const named = getNamedType(arg.type);
  switch (named.name) {
    case 'Int':
    case 'Long':
      return '1';
    case 'ID':
      return JSON.stringify(executionId);
    case 'String':
      return '"core.noop"';
    case 'JSON':
      return '{ steps: [{ id: "a", action: "core.noop" }] }';
    case 'Boolean':
      return 'false';
    default:
      return isInputObjectType(named) ? '{}' : '"x"';
  }
}
const requiredArgs = (field: GraphQLField<unknown, unknown>, except?: string) =>
  field.args.filter((a) => a.name !== except && isNonNullType(a.type) && a.defaultValue === undefined).map((a) => `${a.name}: ${filler(a)}`);

function positions(sdl: string): Position[] {
  const schema = buildSchema(sdl);
  const out: Position[] = [];
  const roots: [Position['operation'], GraphQLObjectType | null | undefined][] = [
    ['query', schema.getQueryType()],
    ['mutation', schema.getMutationType()],
    ['subscription', schema.getSubscriptionType()],
  ];
  for (const [operation, root] of roots) {
    if (!root) continue;
    // Root fields, and one level down from a root query field that takes only fillable arguments.
    const visit = (type: GraphQLObjectType, route: Position['route']) => {
      for (const field of Object.values(type.getFields())) {
        for (const arg of field.args) {
          for (const p of inputPaths(arg.type)) out.push({ operation, route: [...route, { field, fixed: requiredArgs(field, arg.name).join(', ') }], arg, ...p });
        }
        const next = getNamedType(field.type);
        if (route.length === 0 && operation === 'query' && isObjectType(next)) visit(next, [{ field, fixed: requiredArgs(field).join(', ') }]);
      }
    };
    visit(root, []);
  }
  return out;
}

/** `query($v: T) { a(x: 1) { b(arg: $v) { __typename } } }`, or the value inside an input object literal. */
function operationFor(p: Position): { text: string; variable: string; type: GraphQLInputType } {
  const innerType = p.inner.reduce<GraphQLInputType>((t, name) => {
    const named = getNamedType(t);
    return isInputObjectType(named) ? named.getFields()[name]!.type : t;
  }, p.arg.type);
  // The variable has the position's own type (`ID!`, `[String!]`), so the value reaches the resolver.
  const varType = String(innerType);
  const argValue = p.inner.reduceRight((inside, name) => `{ ${name}: ${inside} }`, '$v');
  let body = '__typename';
  for (let i = p.route.length - 1; i >= 0; i--) {
    const { field, fixed } = p.route[i]!;
    const args = [fixed, i === p.route.length - 1 ? `${p.arg.name}: ${argValue}` : ''].filter(Boolean).join(', ');
    body = `${field.name}${args ? `(${args})` : ''} { ${body} }`;
  }
  return { text: `${p.operation}($v: ${varType}) { ${body} }`, variable: `${p.operation} ${p.route.map((r) => r.field.name).join('.')}(${[p.arg.name, ...p.inner].join('.')}: ${getNamedType(innerType).name})`, type: innerType };
}

async function send(text: string, v: unknown, subscription: boolean): Promise<{ status: number; body: string }> {
  const res = await fetch(api().url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: subscription ? 'text/event-stream' : 'application/graphql-response+json, application/json' },
    body: JSON.stringify({ query: text, variables: { v } }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: await res.text() };
}

describe('every String, ID, JSON and DateTime argument, fed hostile values', () => {
  let all: Position[];
  beforeAll(async () => {
    ({ executionId } = await api().runtime.submit({ action: 'core.noop' }));
    await api().catchUp();
    all = positions(await fs.readFile(SCHEMA_FILE, 'utf8'));
  });

  it('finds the arguments in the SDL, nested ones included', () => {
    const names = all.map((p) => operationFor(p).variable);
    for (const expected of [
      'query executions(filter.action: String)',
      'query executions(filter.since: DateTime)',
      'query actionStats(action: String)',
      'query execution.stateAt(at: DateTime)',
      'mutation submitExecution(input: JSON)',
      'mutation cancelExecution(reason: String)',
      'mutation submitWorkflow(definition: JSON)',
      'query deadLetters(after: String)',
      'subscription executionUpdated(id: ID)',
    ]) {
      expect(names).toContain(expected);
    }
  });

  it('answers each with a client error or data, never an internal error or a 5xx', async () => {
    const started = Date.now();
    for (const p of all) {
      const { text, variable, type } = operationFor(p);
      await fc.assert(
        fc.asyncProperty(valueFor(type, p.scalar), async (v) => {
          const r = await send(text, v, p.operation === 'subscription');
          expect(r.status, `${variable}: ${r.body.slice(0, 300)}`).toBeLessThan(500);
          expect(r.body, variable).not.toContain('INTERNAL_SERVER_ERROR');
          expect(r.body, variable).not.toContain('Unexpected error');
        }),
        { numRuns: RUNS_PER_POSITION, endOnFailure: true },
      );
    }
    expect(all.length).toBeGreaterThan(15);
    expect(Date.now() - started).toBeLessThan(60_000);
  }, 90_000);
});
