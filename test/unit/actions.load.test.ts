// Actions: loading a user's actions module (loadActionsModule), from test/fixtures/actions/
// and from modules written to a scratch directory.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActionRegistry, runAction } from '../../src/actions/registry.ts';
import { builtinActions } from '../../src/actions/builtin.ts';
import { ActionsModuleError, loadActionsModule } from '../../src/actions/load.ts';
import { describeThrown } from '../../src/actions/import-failure.ts';
import { ctx, rejection } from './actions.fixtures.ts';

const FIXTURES = fileURLToPath(new URL('../fixtures/actions/', import.meta.url));

describe('loadActionsModule', () => {
  let scratch: string;
  beforeAll(async () => {
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-actions-'));
  });
  afterAll(async () => {
    await fs.rm(scratch, { recursive: true, force: true });
  });

  it('loads the `actions` export, resolving a relative path against cwd', async () => {
    const actions = await loadActionsModule('./sample-actions.ts', { cwd: FIXTURES });
    expect(actions.map((a) => a.name)).toEqual(['sample.greet', 'sample.math.add']);
    const registry = createActionRegistry([...builtinActions, ...actions]);
    expect(await runAction(registry.get('sample.greet')!, { name: 'baton' }, ctx())).toEqual({ greeting: 'hello, baton' });
    await expect(runAction(registry.get('sample.math.add')!, { a: 1 }, ctx())).rejects.toThrow(/input\.b: /);
  });

  it('loads a default export of a single action by absolute path', async () => {
    const actions = await loadActionsModule(path.join(FIXTURES, 'default-single.ts'));
    expect(actions.map((a) => a.name)).toEqual(['sample.single']);
  });

  it('loads plain .mjs modules', async () => {
    const file = path.join(scratch, 'plain.mjs');
    const actionUrl = new URL('../../src/actions/action.ts', import.meta.url).href;
    const zodUrl = import.meta.resolve('zod'); // the scratch dir has no node_modules
    await fs.writeFile(
      file,
      `import { z } from ${JSON.stringify(zodUrl)};\nimport { defineAction } from ${JSON.stringify(actionUrl)};\n` +
        `export default [defineAction({ name: 'plain.one', input: z.object({}), run: () => 1 })];\n`,
    );
    expect((await loadActionsModule(file)).map((a) => a.name)).toEqual(['plain.one']);
  });

  it('says where it looked when the file does not exist', async () => {
    const err = await rejection(loadActionsModule('./nope/actions.js', { cwd: scratch }));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toBe(
      `actions module not found: ${path.join(scratch, 'nope/actions.js')} ("./nope/actions.js" resolved against ${scratch})`,
    );
    await expect(loadActionsModule(scratch)).rejects.toThrow(/is not a file/);
  });

  it('says what the module exports when none of it is usable', async () => {
    const err = await rejection(loadActionsModule(path.join(FIXTURES, 'not-actions.ts')));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toMatch(/exports no usable actions: it has neither an `actions` nor a default export/);
    expect((err as Error).message).toMatch(/the module exports (config \(an object with keys retries\), helper \(a function \(helper\)\)|helper \(a function \(helper\)\), config \(an object with keys retries\))$/);
  });

  it('names the array entry that is not an action', async () => {
    await expect(loadActionsModule(path.join(FIXTURES, 'bad-element.ts'))).rejects.toThrow(
      /`default\[1\]` is an object with keys name, input, run, not an action/,
    );
  });

  it('describes a default export of the wrong kind', async () => {
    const file = path.join(scratch, 'number.mjs');
    await fs.writeFile(file, 'export default 42;\n');
    await expect(loadActionsModule(file)).rejects.toThrow(/`default` is a number/);
    const empty = path.join(scratch, 'empty.mjs');
    await fs.writeFile(empty, 'export const actions = [];\n');
    await expect(loadActionsModule(empty)).rejects.toThrow(/`actions` is an empty array/);
  });

  it('looks inside a CommonJS module.exports for `actions`', async () => {
    const file = path.join(scratch, 'legacy.cjs');
    await fs.writeFile(file, 'module.exports = { actions: "not an array" };\n');
    await expect(loadActionsModule(file)).rejects.toThrow(/`(default\.)?actions` is a string/);
  });

  it('reads a module loaded as CommonJS by the exports its author wrote, not as one `default` object', async () => {
    // What `export default 42` / `export const nothing = 1` compile to with no "type": "module" beside them.
    const number = path.join(scratch, 'default-number.cjs');
    await fs.writeFile(number, 'Object.defineProperty(exports, "__esModule", { value: true });\nexports.default = 42;\n');
    await expect(loadActionsModule(number)).rejects.toThrow(/exports no usable actions: `default` is a number\./);
    const nothing = path.join(scratch, 'nothing.cjs');
    await fs.writeFile(nothing, 'Object.defineProperty(exports, "__esModule", { value: true });\nexports.nothing = 1;\n');
    const err = await rejection(loadActionsModule(nothing));
    expect((err as Error).message).toMatch(/it has neither an `actions` nor a default export.*the module exports (__esModule \(a boolean\), )?nothing \(a number\)$/);
  });

  it('wraps an error thrown while importing', async () => {
    const err = await rejection(loadActionsModule(path.join(FIXTURES, 'throws-on-import.ts')));
    expect(err).toBeInstanceOf(ActionsModuleError);
    expect((err as Error).message).toMatch(/throws-on-import\.ts failed to load: boom at import time at \S+throws-on-import\.ts:3:7$/);
    expect(((err as Error).cause as Error).message).toBe('boom at import time');
  });
});

// A module that fails to import, as Node reports it, is tested through the CLI
// (test/integration/actions-module-cli.test.ts): vitest imports modules its own way.
describe('describeThrown', () => {
  it('says what a non-Error throw was', () => {
    expect(describeThrown('x')).toBe('the string "x"');
    expect(describeThrown(undefined)).toBe('undefined');
    expect(describeThrown(null)).toBe('null');
    expect(describeThrown(7)).toBe('the number 7');
    expect(describeThrown({ code: 7 })).toBe('the object {"code":7}');
    const cycle: Record<string, unknown> = {};
    cycle['self'] = cycle;
    expect(describeThrown(cycle)).toBe('the object [object Object]');
  });
});
