// Whether dist/ (the compiled JavaScript, `npm run build`) is up to date with the sources, so
// bin/baton.js can run it instead of compiling TypeScript on every start. Plain JavaScript with
// no dependencies: it runs before anything else is loaded. scripts/build.js uses the same list
// of source folders to know which files to copy beside the compiled ones.
import fs from 'node:fs';
import path from 'node:path';

/** The folders compiled to dist/ (tsconfig.build.json's `include`), relative to the package root. */
export const SOURCE_DIRS = ['src', 'actors', 'projections', 'schemas'];
/** Files besides the sources whose change makes dist/ stale. */
export const BUILD_INPUTS = ['tsconfig.json', 'tsconfig.build.json'];
/** Written by scripts/build.js when a build succeeds: `{ "startedAt": <ms since epoch> }`. */
export const STAMP = path.join('dist', '.build-stamp.json');
/** The compiled entry point of the command line. */
export const DIST_MAIN = path.join('dist', 'src', 'cli', 'main.js');

/** Every file under the source folders (a missing folder has none: an installed package ships only dist/). */
export function sourceFiles(root) {
  const files = [];
  for (const dir of SOURCE_DIRS) {
    let entries;
    try {
      entries = fs.readdirSync(path.join(root, dir), { recursive: true, withFileTypes: true });
    } catch {
      continue;
    }
    // `parentPath` from Node 20.12 on; `path` before (deprecated since).
    for (const e of entries) if (e.isFile()) files.push(path.join(e.parentPath ?? e.path, e.name));
  }
  return files;
}

/**
 * `{ fresh: true }`, or `{ fresh: false, reason }`: no build, an unfinished one, or a source
 * (or a tsconfig) changed after the last build started. Cost: one stat per source file; with
 * about 150 files that is 3-6 ms, against the ~2 s tsx needs to compile them on every start.
 */
export function distFreshness(root) {
  let startedAt;
  try {
    startedAt = JSON.parse(fs.readFileSync(path.join(root, STAMP), 'utf8')).startedAt;
  } catch {
    return { fresh: false, reason: 'there is no build in dist/' };
  }
  if (typeof startedAt !== 'number' || !fs.existsSync(path.join(root, DIST_MAIN))) return { fresh: false, reason: 'the build in dist/ is incomplete' };
  const inputs = [...sourceFiles(root), ...BUILD_INPUTS.map((f) => path.join(root, f))];
  for (const file of inputs) {
    let mtimeMs;
    try {
      mtimeMs = fs.statSync(file).mtimeMs;
    } catch {
      continue; // deleted meanwhile, or a build input this checkout does not have
    }
    // Compared with the build's start, not its end: a file saved while tsc ran may be missing from dist/.
    if (mtimeMs > startedAt) return { fresh: false, reason: `${path.relative(root, file)} changed after the last build` };
  }
  return { fresh: true };
}

/**
 * Set in its environment by a `baton` that said it runs the sources, so the `baton` processes it
 * starts do not say it again: `baton bench` runs itself again with the deployed Node flags
 * (src/bench/deployed-node.ts), and the notice was printed by both.
 */
export const SOURCES_NOTICE_SHOWN = 'BATON_SOURCES_NOTICE_SHOWN';

/** What bin/baton.js prints on stderr before it runs: nothing for a fresh dist/, or when a `baton` above this one said it. */
export function sourcesNotice(dist, env) {
  if (dist.fresh || env[SOURCES_NOTICE_SHOWN] === '1') return '';
  return `baton: running from the TypeScript sources (slower start): ${dist.reason}; \`npm run build\` compiles them to dist/\n`;
}
