// Where the embedded default's data dir is when BATON_DATA_DIR is unset: the project's `.baton`,
// found upward from the working directory as git finds `.git`, never past a ceiling (the home or
// temp directory) or the filesystem root; `./.baton` when there is none.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultDataDir, defaultCeilings, findDataDir } from '../../src/config-data-dir.ts';
import { loadConfig } from '../../src/config.ts';

let root: string;
beforeAll(() => {
  root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'baton-test-data-dir-')));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const mk = (...parts: string[]) => {
  const dir = path.join(root, ...parts);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
};

describe('finding the data dir', () => {
  it('a command run in a subdirectory of a project uses the project\'s .baton, and says so', () => {
    const project = mk('proj');
    mk('proj', '.baton');
    const sub = mk('proj', 'sub', 'deeper');
    expect(findDataDir(sub, [])).toBe(path.join(project, '.baton'));
    expect(loadConfig({}, sub)).toMatchObject({ dataDir: path.join(project, '.baton'), dataDirFrom: 'above' });
    expect(loadConfig({}, project)).toMatchObject({ dataDir: path.join(project, '.baton'), dataDirFrom: 'cwd' });
    // The nearest wins: a nested project with a .baton of its own keeps to it.
    mk('proj', 'sub', '.baton');
    expect(loadConfig({}, sub)).toMatchObject({ dataDir: path.join(project, 'sub', '.baton'), dataDirFrom: 'above' });
    // BATON_DATA_DIR still decides when set (relative to the working directory).
    expect(loadConfig({ BATON_DATA_DIR: 'data' }, sub)).toMatchObject({ dataDir: path.join(sub, 'data'), dataDirFrom: 'BATON_DATA_DIR' });
    // The retention archive follows the found data dir.
    expect(loadConfig({ BATON_RETENTION: '90d' }, path.join(project, 'sub')).retention?.archiveDir).toBe(path.join(project, 'sub', '.baton', 'archive'));
  });

  it('without a .baton above, ./.baton (created on first use); a file named .baton is not a data dir', () => {
    const lone = mk('lone', 'a');
    fs.writeFileSync(path.join(root, 'lone', '.baton'), 'not a directory');
    expect(findDataDir(lone, [root])).toBeUndefined();
    expect(defaultDataDir(lone, [root])).toEqual({ dataDir: path.join(lone, '.baton'), dataDirFrom: 'cwd' });
  });

  it('stops before a ceiling (the home and temp directories) and at the filesystem root', () => {
    const home = mk('home');
    mk('home', '.baton'); // another tool's ~/.baton, or a `baton` run there once
    const project = mk('home', 'project', 'src');
    expect(findDataDir(project, [home])).toBeUndefined();
    expect(findDataDir(home, [home])).toBe(path.join(home, '.baton')); // run in the ceiling itself: its own
    expect(findDataDir(project, [])).toBe(path.join(home, '.baton')); // without the ceiling, it would be found
    expect(defaultCeilings()).toEqual(expect.arrayContaining([path.resolve(os.homedir()), path.resolve(os.tmpdir())]));
    expect(findDataDir('/', [])).toBe(fs.existsSync('/.baton') ? '/.baton' : undefined); // ends at the root
  });
});
