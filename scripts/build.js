#!/usr/bin/env node
// `npm run build` (and `npm ci`, through the `prepare` script): compile the sources to dist/
// (JavaScript and declarations, tsconfig.build.json), copy beside them every other file the
// code reads at run time by its path (SQL migrations and DDL, the /ui assets, the GraphQL
// schema), then stamp the build so bin/baton.js knows dist/ is current.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SOURCE_DIRS, STAMP, sourceFiles } from '../bin/dist-freshness.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (line) => process.stderr.write(`build: ${line}\n`);

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  // A production install (--omit=dev) has no compiler; bin/baton.js runs the sources through tsx.
  say('typescript is not installed (a production install?): nothing built; bin/baton.js will run the sources through tsx');
  process.exit(0);
}

const startedAt = Date.now();
const dist = path.join(root, 'dist');
fs.rmSync(dist, { recursive: true, force: true }); // no compiled leftovers of deleted sources
try {
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
} catch {
  say('tsc failed; dist/ is not usable (bin/baton.js runs the sources until a build succeeds)');
  process.exit(1);
}

// Declarations keep the sources' `./x.ts` specifiers; an importer's tsc needs `./x.js`, beside
// which it finds x.d.ts (tsc rewrites the extensions only in the JavaScript it emits).
const RELATIVE_TS = /((?:from|import)\s*\(?\s*)(['"])(\.{1,2}\/[^'"]+)\.ts\2/g;
for (const entry of fs.readdirSync(dist, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !entry.name.endsWith('.d.ts')) continue;
  const file = path.join(entry.parentPath ?? entry.path, entry.name);
  const text = fs.readFileSync(file, 'utf8');
  const rewritten = text.replace(RELATIVE_TS, '$1$2$3.js$2');
  if (rewritten !== text) fs.writeFileSync(file, rewritten);
}

let copied = 0;
for (const file of sourceFiles(root)) {
  if (/\.(ts|md)$/.test(file)) continue;
  const target = path.join(dist, path.relative(root, file));
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(file, target);
  copied++;
}
fs.writeFileSync(path.join(root, STAMP), `${JSON.stringify({ startedAt })}\n`);
say(`${SOURCE_DIRS.join(', ')} compiled to dist/ with ${copied} other files in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
