// The package the way a user meets it: `npm pack`, install the tarball into a scratch project
// outside the repository, type-check the README's example there with tsc (its `@ts-expect-error`
// line proves a wrongly typed input does not compile), run it against a real database, and run
// the installed `baton` command. Needs a current build (`npm run build`; `npm ci` makes one).
// About 40-90 s on the 2-core machine, most of it npm install (from npm's cache) and tsc.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distFreshness } from '../../bin/dist-freshness.js';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const run = promisify(execFile);
const ROOT = path.resolve('.');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const EXAMPLE = path.join(ROOT, 'examples', 'from-your-code', 'main.ts');
// Only what a user's shell would have: no BATON_* variables of the test run.
const userEnv = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir(), npm_config_update_notifier: 'false' });

describe('the installed package', () => {
  let scratch: string;
  let db: TestDatabase;
  const at = (...p: string[]) => path.join(scratch, ...p);

  beforeAll(async () => {
    const fresh = distFreshness(ROOT);
    if (!fresh.fresh) throw new Error(`dist/ is not current (${fresh.reason}): run \`npm run build\` before this test`);
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-package-'));
    db = await createTestDatabase({ max: 1 });
    // --ignore-scripts: `prepare` would rebuild dist/ in the repository under other tests' feet.
    const packed = await run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], { cwd: ROOT, timeout: 60_000 });
    const tarball = (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename;
    const own = JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    await fs.writeFile(
      at('package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module', dependencies: { '@baton-run/baton': `file:./${path.basename(tarball)}`, zod: own.dependencies['zod'] } }, null, 2),
    );
    // The compiler comes from the repository, so the install is only the package and its
    // dependencies; Node's types are the ones that install brings (no `types`/`typeRoots`), as a
    // user's project sees them: @eventstore/db-client depends on @types/node 16, which, hoisted,
    // did not compile pino's declarations until the package depended on @types/node 20 itself.
    await fs.writeFile(
      at('tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: false,
          outDir: 'out',
        },
        include: ['main.ts', 'history.test.ts'],
      }),
    );
    await fs.copyFile(EXAMPLE, at('main.ts'));
    // The README's regression test from an exported history: `/testing`'s declarations reach pg's
    // types (the event store's), which the package must bring (@types/pg), or strict tsc fails.
    await fs.writeFile(
      at('history.test.ts'),
      "import { expectHistoryReplays, HistoryDivergesError } from '@baton-run/baton/testing';\nexport const check = (file: string) => expectHistoryReplays(file, { finalState: 'Completed' }).catch((e: unknown) => e instanceof HistoryDivergesError);\n",
    );
    await run(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], { cwd: scratch, env: userEnv(), timeout: 150_000 });
  }, 240_000);

  afterAll(async () => {
    await db?.drop();
    if (scratch) await fs.rm(scratch, { recursive: true, force: true });
  });

  it('ships compiled JavaScript with declarations and no TypeScript sources', async () => {
    const pkg = at('node_modules', '@baton-run', 'baton');
    const manifest = JSON.parse(await fs.readFile(path.join(pkg, 'package.json'), 'utf8')) as { exports: Record<string, { types: string; default: string }> };
    for (const entry of ['.', './worker', './testing']) {
      await fs.access(path.join(pkg, manifest.exports[entry]!.default));
      await fs.access(path.join(pkg, manifest.exports[entry]!.types));
    }
    await expect(fs.access(path.join(pkg, 'src'))).rejects.toThrow();
  });

  it("type-checks the README's example (a wrong input type does not compile) and runs it: worker, client, typed result", async () => {
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const compiled = await run(process.execPath, [tsc, '-p', scratch], { cwd: scratch, timeout: 120_000 }).catch((e: { stdout: string }) => e);
    expect(compiled.stdout).toBe('');
    const r = await run(process.execPath, [at('out', 'main.js')], { cwd: scratch, env: { ...userEnv(), DATABASE_URL: db.url }, timeout: 60_000 });
    expect(r.stdout).toMatch(/^charged 500 cents in execution [0-9a-f-]{36}\n/);
    expect(r.stdout).toContain('refused: invalid input for action billing.charge: input.cents: Invalid input: expected number, received string');
  }, 180_000);

  it('runs the installed `baton` command from dist/, without tsx', async () => {
    const r = await run(at('node_modules', '.bin', 'baton'), ['--version'], { cwd: scratch, env: userEnv(), timeout: 30_000 });
    expect(r.stdout.trim()).toBe(JSON.parse(await fs.readFile(path.join(ROOT, 'package.json'), 'utf8')).version);
    expect(r.stderr).toBe('');
  });

  it('is the example the README shows', async () => {
    const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8');
    const example = await fs.readFile(EXAMPLE, 'utf8');
    expect(readme).toContain(example.split('\n').slice(3).join('\n').trim());
  });
});
