// Where the embedded default keeps its data when BATON_DATA_DIR is unset: the project's `.baton`,
// found by searching upward from the working directory as git finds `.git`. Without the search, a
// command run in a subdirectory of a project started a new, empty embedded Postgres there.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const DATA_DIR_NAME = '.baton';

/** How the data dir was chosen: BATON_DATA_DIR, the working directory's own `.baton`, or one found above it. */
export type DataDirSource = 'BATON_DATA_DIR' | 'cwd' | 'above';

/**
 * Directories the search does not enter from below: the home directory and the temp directory
 * hold unrelated projects, so a `.baton` there (left by a `baton` run there once, or another
 * tool's `~/.baton`) must not capture every project under them. Run in one of them, its own
 * `.baton` is still used, as in any working directory.
 */
export function defaultCeilings(): string[] {
  return [os.homedir(), os.tmpdir()].filter((d) => d !== '').map((d) => path.resolve(d));
}

/**
 * The nearest `<dir>/.baton` directory from `cwd` upward: `cwd` itself first, then its parents,
 * stopping at the filesystem root and before any of `ceilings`. undefined when there is none.
 */
export function findDataDir(cwd: string, ceilings: readonly string[] = defaultCeilings()): string | undefined {
  const stops = new Set(ceilings.map((d) => path.resolve(d)));
  for (let dir = path.resolve(cwd); ; ) {
    const candidate = path.join(dir, DATA_DIR_NAME);
    if (isDirectory(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir || stops.has(parent)) return undefined;
    dir = parent;
  }
}

/** The data dir to use when BATON_DATA_DIR is unset: the one found, else `<cwd>/.baton` (created on first use). */
export function defaultDataDir(cwd: string, ceilings?: readonly string[]): { dataDir: string; dataDirFrom: Exclude<DataDirSource, 'BATON_DATA_DIR'> } {
  const here = path.resolve(cwd, DATA_DIR_NAME);
  const found = findDataDir(cwd, ceilings);
  return found === undefined || found === here ? { dataDir: here, dataDirFrom: 'cwd' } : { dataDir: found, dataDirFrom: 'above' };
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false; // missing, or a parent we may not search: not a project's
  }
}
