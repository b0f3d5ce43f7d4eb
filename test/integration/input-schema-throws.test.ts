// An action whose input schema throws (a refinement or transform that throws) or is async
// (zod cannot check it synchronously) is an invalid-input refusal naming the action and what
// went wrong, at every door: the client in both modes, GraphQL's submitExecution and
// submitExecutions, and `baton submit` (one request, and --file). Never an internal error.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '@baton-run/baton';
import { useClientPair } from '../support/client-pair.ts';
import { runBaton } from '../support/cli.ts';

const ASYNC = "cannot be checked: the action's input schema is asynchronous (an async refine or transform), and Baton checks inputs synchronously; make its refinements and transforms synchronous";
const THREW = "transform blew up (thrown by a refinement or transform of the action's input schema)";

const asyncAction = defineAction({ name: 'qa.async', input: z.object({ n: z.number() }).refine(async () => true), run: () => null });
const throwing = defineAction({
  name: 'qa.transform',
  input: z.string().transform((s) => {
    if (s === 'bad') throw new Error('transform blew up');
    return s;
  }),
  run: (s) => s,
});

const { t, clients, api } = useClientPair({ actions: [asyncAction, throwing], clientsKnowActions: true });
const requested = async () => (await t.db.pool.query("SELECT count(*)::int AS n FROM baton_events WHERE type = 'ExecutionRequested'")).rows[0].n as number;

async function graphql(query: string, variables: Record<string, unknown>): Promise<{ errors?: { message: string; extensions: { code: string } }[] }> {
  const res = await fetch(api().url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  return (await res.json()) as { errors?: { message: string; extensions: { code: string } }[] };
}

describe('input schemas that throw or are async', () => {
  it('the client refuses them in both modes, naming the action and why', async () => {
    for (const mode of ['database', 'graphql'] as const) {
      const client = clients[mode];
      const a = await client.submit(asyncAction, { n: 1 }).catch((e: unknown) => e);
      expect((a as Error).name, mode).toMatch(/^Invalid(Action)?InputError$/);
      expect((a as Error).message, mode).toContain(`input: ${ASYNC}`);
      const b = await client.submit(throwing, 'bad').catch((e: unknown) => e);
      expect((b as Error).name, mode).toMatch(/^Invalid(Action)?InputError$/);
      expect((b as Error).message, mode).toContain(`input: ${THREW}`);
      const many = await client.submitMany([{ action: throwing, input: 'ok' }, { action: throwing, input: 'bad' }]).catch((e: unknown) => e);
      expect((many as Error).name, mode).toMatch(/^Invalid(Action)?InputError$/);
      expect((many as Error).message, mode).toMatch(/transform blew up/);
    }
    expect(await requested()).toBe(0);
  });

  it('GraphQL refuses them as BAD_USER_INPUT, never an internal error', async () => {
    const one = await graphql('mutation($input: JSON) { submitExecution(action: "qa.async", input: $input) { executionId } }', { input: { n: 1 } });
    expect(one.errors?.[0]).toMatchObject({ message: `input: ${ASYNC}`, extensions: { code: 'BAD_USER_INPUT' } });
    const two = await graphql('mutation($input: JSON) { submitExecution(action: "qa.transform", input: $input) { executionId } }', { input: 'bad' });
    expect(two.errors?.[0]).toMatchObject({ message: `input: ${THREW}`, extensions: { code: 'BAD_USER_INPUT' } });
    const many = await graphql('mutation($inputs: [SubmitExecutionInput!]!) { submitExecutions(inputs: $inputs) { created } }', {
      inputs: [
        { action: 'qa.transform', input: 'ok' },
        { action: 'qa.async', input: { n: 1 } },
      ],
    });
    expect(many.errors?.[0]?.extensions.code).toBe('BAD_USER_INPUT');
    expect(many.errors?.[0]?.message).toContain(`inputs.1.input: ${ASYNC}`);
    expect(await requested()).toBe(0);
  });

  describe('baton submit', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-qa-schemas-'));
      const baton = pathToFileURL(path.resolve('dist/src/index.js')).href;
      const zod = pathToFileURL(path.resolve('node_modules/zod/index.js')).href;
      await fs.writeFile(
        path.join(dir, 'actions.mjs'),
        [
          `import { z } from '${zod}';`,
          `import { defineAction } from '${baton}';`,
          'export const actions = [',
          "  defineAction({ name: 'qa.async', input: z.object({ n: z.number() }).refine(async () => true), run: () => null }),",
          "  defineAction({ name: 'qa.transform', input: z.string().transform((s) => { if (s === 'bad') throw new Error('transform blew up'); return s; }), run: (s) => s }),",
          '];',
        ].join('\n'),
      );
      await fs.writeFile(path.join(dir, 'lines.ndjson'), '{"action":"qa.transform","input":"ok"}\n{"action":"qa.transform","input":"bad"}\n');
    });
    afterAll(() => fs.rm(dir, { recursive: true, force: true }));

    it('refuses them with the reason and no stack', async () => {
      const a = await runBaton(['submit', 'qa.async', '--actions', './actions.mjs', '--input', '{"n":1}'], { databaseUrl: t.db.url, cwd: dir });
      expect(a.code, a.stderr).toBe(1);
      expect(a.stderr).toContain(`invalid input for action qa.async: input: ${ASYNC}`);
      const b = await runBaton(['submit', 'qa.transform', '--actions', './actions.mjs', '--input', '"bad"'], { databaseUrl: t.db.url, cwd: dir });
      expect(b.code, b.stderr).toBe(1);
      expect(b.stderr).toContain(`invalid input for action qa.transform: input: ${THREW}`);
      for (const r of [a, b]) expect(r.stderr).not.toMatch(/\n\s+at |ZodAsyncError/);
      const file = await runBaton(['submit', '--file', 'lines.ndjson', '--actions', './actions.mjs'], { databaseUrl: t.db.url, cwd: dir });
      expect(file.stderr).toContain(THREW);
      expect(file.stderr).not.toMatch(/\n\s+at /);
    });
  });
});
