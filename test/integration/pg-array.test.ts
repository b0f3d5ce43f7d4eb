// arrayLiteral against the real Postgres: whatever the elements, the array that arrives is the
// array that was sent, as with node-postgres's own conversion.
import { describe, expect, it } from 'vitest';
import { arrayLiteral } from '../../src/db/pg-array.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();

describe('arrayLiteral', () => {
  it('round-trips text with quotes, backslashes, commas, braces, spaces, NULL-like words, empties and unicode', async () => {
    const texts = ['execution-0f8fad5b-d9cb-469f-a165-70867728950e', 'a,b', '{x}', 'say "hi"', 'back\\slash', ' lead', 'tab\there', 'NULL', 'null', 'Null', 'NULLS', '', 'ünïcødé ✓', 'a/b:c@d+e', '\\"', 'line\nbreak'];
    const { rows } = await db().pool.query<{ a: string[] }>('SELECT $1::text[] AS a', [arrayLiteral(texts)]);
    expect(rows[0]!.a).toEqual(texts);
    const mixed = ['x', null, 'NULL', undefined];
    const r2 = await db().pool.query<{ a: (string | null)[] }>('SELECT $1::text[] AS a', [arrayLiteral(mixed)]);
    expect(r2.rows[0]!.a).toEqual(['x', null, 'NULL', null]);
  });

  it('round-trips numbers, bigints, uuids and the empty array', async () => {
    const { rows } = await db().pool.query<{ i: number[]; b: string[]; u: string[]; e: number[] }>(
      'SELECT $1::int[] AS i, $2::bigint[] AS b, $3::uuid[] AS u, $4::int[] AS e',
      [arrayLiteral([1, -2, 0]), arrayLiteral([9007199254740993n, null, 0n]), arrayLiteral(['0f8fad5b-d9cb-469f-a165-70867728950e']), arrayLiteral([])],
    );
    expect(rows[0]).toEqual({ i: [1, -2, 0], b: ['9007199254740993', null, '0'], u: ['0f8fad5b-d9cb-469f-a165-70867728950e'], e: [] });
  });
});
