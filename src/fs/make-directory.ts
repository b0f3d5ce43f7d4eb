// Creating a directory and its missing parents, without Node's `mkdir(…, { recursive: true })`:
// in Node 20 that loops for ever at full CPU when the parent exists but creating the child answers
// ENOENT (anywhere under /proc, say), so a command given such a path hung instead of failing.
// Here each missing level is made on its own, and the first refusal is thrown with its path.
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';

const codeOf = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/** What Node's own mkdir would throw, for a file standing where a directory must be. */
function notADirectory(at: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${at}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: at });
}

async function isDirectory(at: string): Promise<boolean> {
  return (await stat(at).catch(() => undefined))?.isDirectory() === true;
}

/**
 * Make `dir` and whichever of its ancestors are missing (each with `mode`, when given); nothing
 * when it is a directory already. Throws the file system's error, with the path it was about,
 * for anything else: a file in the way (ENOTDIR), no permission, a file system that refuses.
 */
export async function makeDirectory(dir: string, o: { mode?: number } = {}): Promise<void> {
  const target = path.resolve(dir);
  // Walk up to the first ancestor that exists, noting each missing level.
  const missing: string[] = [];
  for (let at = target; ; ) {
    let isDir: boolean;
    try {
      isDir = (await stat(at)).isDirectory();
    } catch (err) {
      const parent = path.dirname(at);
      if (codeOf(err) !== 'ENOENT' || parent === at) throw err;
      missing.push(at);
      at = parent;
      continue;
    }
    if (!isDir) throw notADirectory(at);
    break;
  }
  // Then down again, one level at a time: a refusal stops here instead of being retried.
  for (const at of missing.reverse()) {
    try {
      await mkdir(at, o.mode === undefined ? {} : { mode: o.mode });
    } catch (err) {
      // Made meanwhile by someone else: as good, when it is a directory.
      if (codeOf(err) === 'EEXIST' && (await isDirectory(at))) continue;
      if (codeOf(err) === 'EEXIST') throw notADirectory(at);
      throw err;
    }
  }
}
