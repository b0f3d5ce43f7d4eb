// Why a user's module failed to import, said so a person can fix it: the error, the file and
// line where it happened (also when that is a module it imports), and what was thrown when it
// was not an Error. Runs only after an import failed, so it may take its time.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { printable } from '../input/rules.ts';

/** Baton's own sources (src/, or dist/src/): a frame there is not where the user's code failed. */
const BATON_SOURCES = fileURLToPath(new URL('../', import.meta.url));
/** Modules followed (and syntax-checked) looking for a syntax error Node did not place. */
const MAX_MODULES_SEARCHED = 50;

interface Place {
  file: string;
  line: number;
  column?: number;
}

/**
 * `Unexpected token ';' at /app/lib/util.mjs:3:11 (imported by actions.mjs)`. Node's own message
 * when it already says where (a missing module names its importer; tsx names file:line:col).
 */
export async function describeImportFailure(err: unknown, file: string): Promise<string> {
  if (!(err instanceof Error)) return `it threw ${describeThrown(err)}, not an Error`;
  const what = err.name && err.name !== 'Error' && !err.message.startsWith(err.name) ? `${err.name}: ${err.message}` : err.message;
  if (/:\d+:\d+/.test(err.message)) return what;
  const place = placeInStack(err) ?? (err.name === 'SyntaxError' ? await findSyntaxError(file) : undefined);
  if (!place) return what;
  const at = `${place.file}:${place.line}${place.column ? `:${place.column}` : ''}`;
  return path.resolve(place.file) === path.resolve(file) ? `${what} at ${at}` : `${what} at ${at} (a module ${path.basename(file)} imports)`;
}

/** `the string "x"`, `undefined`, `the object {"code":1}`. */
export function describeThrown(value: unknown): string {
  if (value === undefined || value === null) return String(value);
  if (typeof value === 'string') return `the string "${printable(value, 200)}"`;
  if (typeof value !== 'object') return `the ${typeof value} ${printable(String(value), 200)}`;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  // JSON is printable already (printable() would escape its quotes).
  const text = json ?? Object.prototype.toString.call(value);
  return `the object ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`;
}

/** Where the stack says: Node's `file:line` header of a syntax error, else the first frame in user code. */
function placeInStack(err: Error): Place | undefined {
  const lines = (err.stack ?? '').split('\n');
  const header = /^(file:\/\/\S+|\/\S+):(\d+)$/.exec(lines[0] ?? '');
  if (header) {
    const caret = lines[2]?.indexOf('^') ?? -1;
    return { file: toPath(header[1]!), line: Number(header[2]), ...(caret >= 0 && { column: caret + 1 }) };
  }
  for (const line of lines) {
    const frame = /^\s+at (?:.*\()?((?:file:\/\/)?\/[^()]+?):(\d+):(\d+)\)?$/.exec(line);
    if (!frame) continue;
    const file = toPath(frame[1]!);
    if (file.startsWith(BATON_SOURCES) || file.includes(`${path.sep}node_modules${path.sep}`)) continue;
    return { file, line: Number(frame[2]), column: Number(frame[3]) };
  }
  return undefined;
}

const toPath = (s: string): string => (s.startsWith('file://') ? fileURLToPath(s) : s);

/**
 * Node (20) does not say where an ES module's syntax error is, nor in which module. `node --check`
 * does, for one file: check the module, then the modules it imports by relative path, breadth first.
 */
async function findSyntaxError(file: string): Promise<Place | undefined> {
  const queue = [path.resolve(file)];
  const seen = new Set(queue);
  for (let i = 0; i < queue.length && i < MAX_MODULES_SEARCHED; i++) {
    const current = queue[i]!;
    const source = await fs.readFile(current, 'utf8').catch(() => undefined);
    if (source === undefined) continue;
    // TypeScript goes through tsx, whose errors name file:line:col already: follow its imports only.
    if (/\.(c|m)?js$/.test(current)) {
      const place = await checkSyntax(current);
      if (place) return place;
    }
    for (const m of source.matchAll(/(?:^|[;\s}])(?:import|export)\s*(?:[\w*{}\s,$]*\sfrom\s*)?["'](\.{1,2}\/[^"']+)["']/g)) {
      const dependency = path.resolve(path.dirname(current), m[1]!);
      if (!seen.has(dependency)) {
        seen.add(dependency);
        queue.push(dependency);
      }
    }
  }
  return undefined;
}

/** `node --check file`: where its syntax error is, or undefined when it parses. */
function checkSyntax(file: string): Promise<Place | undefined> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--check', file], { timeout: 10_000 }, (err, _stdout, stderr) => {
      if (!err) return resolve(undefined);
      // `<file>:<line>`, the source line, a caret under the column.
      const lines = String(stderr).split('\n');
      const header = /^(.+):(\d+)$/.exec(lines[0] ?? '');
      const caret = lines[2]?.indexOf('^') ?? -1;
      resolve(header ? { file: toPath(header[1]!), line: Number(header[2]), ...(caret >= 0 && { column: caret + 1 }) } : undefined);
    });
  });
}
