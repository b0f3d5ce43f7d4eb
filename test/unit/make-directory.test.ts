// makeDirectory (src/fs/make-directory.ts): makes a directory and its missing parents, is a no-op
// on one that exists, and throws with the path where Node's recursive mkdir never settled
// (a child under /proc answers ENOENT though its parent exists: Node 20 retried for ever).
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDirectory } from '../../src/fs/make-directory.ts';

let scratch: string;
beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-make-directory-'));
});
afterAll(() => fs.rm(scratch, { recursive: true, force: true }));

/** Settles within `ms`, or fails saying it hung (what the old code did). */
function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([p, hung]).finally(() => clearTimeout(timer));
}

describe('makeDirectory', () => {
  it('makes every missing level, and again is a no-op', async () => {
    const deep = path.join(scratch, 'a', 'b', 'c');
    await makeDirectory(deep);
    expect((await fs.stat(deep)).isDirectory()).toBe(true);
    await fs.writeFile(path.join(deep, 'kept'), 'x');
    await makeDirectory(deep);
    await makeDirectory(path.join(scratch, 'a'));
    expect(await fs.readFile(path.join(deep, 'kept'), 'utf8')).toBe('x');
  });

  it('gives each level it makes the mode asked for', async () => {
    const dir = path.join(scratch, 'moded', 'inner');
    await makeDirectory(dir, { mode: 0o750 });
    for (const d of [dir, path.dirname(dir)]) expect((await fs.stat(d)).mode & 0o777 & ~process.umask()).toBe(0o750 & ~process.umask());
  });

  it('takes a relative path from the working directory', async () => {
    const rel = path.relative(process.cwd(), path.join(scratch, 'rel', 'x'));
    await makeDirectory(rel);
    expect((await fs.stat(path.join(scratch, 'rel', 'x'))).isDirectory()).toBe(true);
  });

  it('refuses a file where a directory must be, naming its path (the target itself, or a level above)', async () => {
    const file = path.join(scratch, 'a-file');
    await fs.writeFile(file, 'x');
    await expect(makeDirectory(file)).rejects.toMatchObject({ code: 'ENOTDIR', path: file });
    await expect(makeDirectory(path.join(file, 'below', 'deeper'))).rejects.toMatchObject({ code: 'ENOTDIR', path: path.join(file, 'below', 'deeper') });
  });

  it('two at once on the same new tree both succeed', async () => {
    const dir = path.join(scratch, 'racing', 'x', 'y');
    await Promise.all([makeDirectory(dir), makeDirectory(dir), makeDirectory(path.join(dir, 'z'))]);
    expect((await fs.stat(path.join(dir, 'z'))).isDirectory()).toBe(true);
  });

  // Needs Linux's /proc, where a new entry cannot be made; skipped where there is none.
  it.skipIf(!existsSync('/proc/self'))('fails at once under /proc, where recursive mkdir spins for ever (skipped where there is no /proc)', async () => {
    await expect(within(5_000, makeDirectory('/proc/baton-test'))).rejects.toMatchObject({ code: 'ENOENT', path: '/proc/baton-test' });
    await expect(within(5_000, makeDirectory('/proc/baton-test/a/b'))).rejects.toMatchObject({ code: 'ENOENT', path: '/proc/baton-test' });
  });
});
