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
