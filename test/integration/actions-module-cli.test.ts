// A user's TypeScript actions module outside Baton's repository, as `--actions` takes it from the
// compiled CLI: in a directory whose package.json has no "type" (or none at all), Node treats the
// .ts file as CommonJS. It was read as plain JavaScript (a type annotation a syntax error) or
// failed as "require() of an ES module in a cycle" (src/user-modules/import-module.ts).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
const ROOT = path.resolve('.');

describe('--actions with a TypeScript module in a CommonJS project', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-user-actions-'));
    // A project as `npm init -y` leaves it: no "type", so CommonJS.
    await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'user-project', version: '1.0.0' }));
    const baton = pathToFileURL(path.join(ROOT, 'dist/src/index.js')).href;
    const zod = pathToFileURL(path.join(ROOT, 'node_modules/zod/index.js')).href;
    await fs.writeFile(
      path.join(dir, 'actions.ts'),
      [
        `import { z } from '${zod}';`,
        `import { defineAction } from '${baton}';`,
        'const greeting: string = "hello";',
        'export const actions = [defineAction({ name: "user.greet", input: z.object({ name: z.string() }), run: async ({ name }: { name: string }) => `${greeting} ${name}` })];',
      ].join('\n'),
    );
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  it('loads it, and its actions are offered and checked', async () => {
    const ok = await runBaton(['submit', 'user.greet', '--actions', './actions.ts', '--input', '{"name":"you"}'], { databaseUrl: db().url, cwd: dir });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^submitted: [0-9a-f-]{36}/);
    const bad = await runBaton(['submit', 'user.greet', '--actions', './actions.ts', '--input', '{"name":1}'], { databaseUrl: db().url, cwd: dir });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/input\.name: .*expected string/);
  });
});

// As Node (not vitest) imports them: where a module's syntax error is, in which module, and what a non-Error throw was.
describe('--actions with a module that fails to import', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-broken-actions-'));
    const write = (name: string, text: string) => fs.writeFile(path.join(dir, name), text);
    await fs.mkdir(path.join(dir, 'lib'));
    await write('syntax.mjs', 'export const actions = [];\nconst x = ;\n');
    await write('imports-bad.mjs', "import './lib/bad-dep.mjs';\nexport const actions = [];\n");
    await write('lib/bad-dep.mjs', 'export const a = 1;\n\nconst y = ;\n');
    await write('imports-throwing.mjs', "import './lib/throws.mjs';\nexport const actions = [];\n");
    await write('lib/throws.mjs', "const a = 1;\nthrow new TypeError('dependency broke');\n");
    await write('throws-string.mjs', "throw 'x';\n");
    await write('throws-undefined.mjs', 'throw undefined;\n');
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  const refusal = async (module: string): Promise<string> => {
    const r = await runBaton(['submit', 'core.noop', '--actions', `./${module}`], { databaseUrl: db().url, cwd: dir });
    expect(r.code, r.stderr).toBe(1);
    return r.stderr.trimEnd();
  };
  const file = (name: string) => path.join(dir, name);

  it('names the file, line and column of a syntax error, also in a module it imports', async () => {
    expect(await refusal('syntax.mjs')).toBe(`baton: actions module ${file('syntax.mjs')} failed to load: SyntaxError: Unexpected token ';' at ${file('syntax.mjs')}:2:11`);
    expect(await refusal('imports-bad.mjs')).toBe(
      `baton: actions module ${file('imports-bad.mjs')} failed to load: SyntaxError: Unexpected token ';' at ${file('lib/bad-dep.mjs')}:3:11 (a module imports-bad.mjs imports)`,
    );
    expect(await refusal('imports-throwing.mjs')).toBe(
      `baton: actions module ${file('imports-throwing.mjs')} failed to load: TypeError: dependency broke at ${file('lib/throws.mjs')}:2:7 (a module imports-throwing.mjs imports)`,
    );
  });

  it('says what was thrown when it was not an Error', async () => {
    expect(await refusal('throws-string.mjs')).toBe(`baton: actions module ${file('throws-string.mjs')} failed to load: it threw the string "x", not an Error`);
    expect(await refusal('throws-undefined.mjs')).toBe(`baton: actions module ${file('throws-undefined.mjs')} failed to load: it threw undefined, not an Error`);
  });
});
