// submitMany over GraphQL refuses, before the first batch is sent, every item whose action's
// schema the client knows (a definition passed, the client's `actions`, a built-in), exactly as
// over the database: 600 items with a bad 551st store nothing, and the error is the same.
import { expect, it, vi } from 'vitest';
import { z } from 'zod';
import { InvalidActionInputError, SubmitManyError, defineAction, type SubmitItem } from '@baton-run/baton';
import { useClientPair } from '../support/client-pair.ts';

const double = defineAction({ name: 'test.double', input: z.object({ n: z.number().int() }), run: async ({ n }) => n * 2 });

// No worker: nothing runs; only what is stored counts. Both clients know `double`.
const { t, clients } = useClientPair({ actions: [double], clientsKnowActions: true });
const requested = async () => (await t.db.pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionRequested'")).rows[0].n as number;

/** 600 items, item 550 bad. */
const withBad = (bad: SubmitItem): SubmitItem[] => Array.from({ length: 600 }, (_, i) => (i === 550 ? bad : { action: 'core.noop' }));

it.each([
  ['a built-in', { action: 'core.sleep', input: { ms: -1 } }, /^items\[550\]: invalid input for action core\.sleep: input\.ms: Too small/],
  ['a definition passed', { action: double, input: { n: 'x' } }, /^items\[550\]: invalid input for action test\.double: input\.n: /],
  ["one of the client's actions, by name", { action: 'test.double', input: { n: 1.5 } }, /^items\[550\]: invalid input for action test\.double: input\.n: /],
] as [string, SubmitItem, RegExp][])('an item of %s with input its schema refuses: the whole call refused, nothing stored, alike in both modes', async (_, bad, message) => {
  const before = await requested();
  const database = await clients.database.submitMany(withBad(bad)).catch((e: unknown) => e);
  const fetched = vi.spyOn(globalThis, 'fetch');
  let graphql: unknown;
  try {
    graphql = await clients.graphql.submitMany(withBad(bad)).catch((e: unknown) => e);
    expect(fetched).not.toHaveBeenCalled(); // refused before the first batch was sent
  } finally {
    fetched.mockRestore();
  }
  expect(database).toBeInstanceOf(InvalidActionInputError);
  expect((database as Error).message).toMatch(message);
  expect(graphql).toBeInstanceOf(InvalidActionInputError);
  expect((graphql as Error).message).toBe((database as Error).message);
  expect(graphql).not.toBeInstanceOf(SubmitManyError); // nothing was sent, so no results to report
  expect(await requested()).toBe(before);
});
