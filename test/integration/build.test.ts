// `npm run build` (scripts/build.js), run in a copy of the package: dist/ holds JavaScript and
// declarations for every source and every file the code reads at run time by its path, and a
// compiled Baton runs: fresh (no note), and with a user's TypeScript module that imports Baton's
// sources sharing Baton's compiled modules rather than loading a second copy.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = path.resolve('.');
const SOURCE_DIRS = ['src', 'actors', 'projections', 'schemas'];

describe('npm run build', () => {
  let copy: string;
  const inCopy = (...p: string[]) => path.join(copy, ...p);
  const filesUnder = async (dir: string) =>
    (await fs.readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));

  beforeAll(async () => {
    copy = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-build-'));
    for (const entry of ['bin', 'scripts', 'examples', 'test/fixtures', 'test/histories', ...SOURCE_DIRS, 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
      await fs.cp(path.join(ROOT, entry), inCopy(entry), { recursive: true });
    }
    await fs.symlink(path.join(ROOT, 'node_modules'), inCopy('node_modules'));
    // tsc on 2 cores: ~10 s idle, 30-45 s while other test files run.
    await run(process.execPath, ['scripts/build.js'], { cwd: copy, timeout: 150_000 });
  }, 180_000);
  afterAll(async () => {
    if (copy) await fs.rm(copy, { recursive: true, force: true });
  });

  it('emits JavaScript and declarations for every source, and copies every other file beside them', async () => {
    const emitted = new Set(await filesUnder(inCopy('dist')));
    for (const dir of SOURCE_DIRS) {
      for (const file of await filesUnder(inCopy(dir))) {
        const rel = path.join(dir, file);
        if (rel.endsWith('.md')) continue;
        if (rel.endsWith('.ts')) {
          expect(emitted, rel).toContain(rel.replace(/\.ts$/, '.js'));
          expect(emitted, rel).toContain(rel.replace(/\.ts$/, '.d.ts'));
        } else {
          expect(emitted, rel).toContain(rel); // SQL, the /ui assets, the GraphQL schema
          expect(await fs.readFile(inCopy('dist', rel), 'utf8')).toBe(await fs.readFile(inCopy(rel), 'utf8'));
        }
      }
    }
    // The emitted JavaScript imports .js; nothing still names a .ts file.
    const main = await fs.readFile(inCopy('dist/src/cli/main.js'), 'utf8');
    expect(main).toMatch(/from "\.\/arguments\.js"/);
    expect(main).not.toMatch(/from ["'][^"']+\.ts["']/);
  });

  it('runs compiled, saying nothing about sources, and loads a TypeScript candidate machine', async () => {
    const { version } = JSON.parse(await fs.readFile(inCopy('package.json'), 'utf8')) as { version: string };
    const v = await run(process.execPath, ['bin/baton.js', '--version'], { cwd: copy, timeout: 60_000 });
    expect(v).toEqual({ stdout: `${version}\n`, stderr: '' });
    // The README's candidate drops progress reports from Running: this history has one.
    const replay = await run(process.execPath, ['bin/baton.js', 'replay', '--file', 'test/histories/report-completed.json', '--against', './examples/candidate.machine.ts'], { cwd: copy, timeout: 60_000 }).catch((e: { code: number; stdout: string; stderr: string }) => e);
    expect(replay.stderr).toBe('');
    expect(replay.stdout).toMatch(/against \.\/examples\/candidate\.machine\.ts \(version 4-candidate\)/);
    expect(replay.stdout).toMatch(/unhandled-event .*ExecutionProgressed is not handled in state Running/);
    expect((replay as { code?: number }).code).toBe(1);
  });

  it("gives a user's TypeScript module Baton's compiled modules, not a second copy from the sources", async () => {
    const script = `
      const { importUserModule } = await import(${JSON.stringify(pathToFileURL(inCopy('dist/src/user-modules/import-module.js')).href)});
      const user = await importUserModule(${JSON.stringify(inCopy('test/fixtures/modules/uses-baton-sources.ts'))});
      const actions = await import(${JSON.stringify(pathToFileURL(inCopy('dist/src/actions/index.js')).href)});
      const machine = await import(${JSON.stringify(pathToFileURL(inCopy('dist/actors/execution.machine.js')).href)});
      console.log(JSON.stringify({ actionError: user.ActionError === actions.ActionError, machine: user.executionMachine === machine.executionMachine }));
    `;
    const r = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: copy, timeout: 60_000 });
    expect(JSON.parse(r.stdout)).toEqual({ actionError: true, machine: true });
  });
});
