// Running the `baton` command line as a child process, to the end, for CLI tests.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BIN = path.resolve('bin/baton.js');

/**
 * The line bin/baton.js prints when dist/ is older than the sources and it runs them through tsx
 * instead. Not the command's output: runBaton leaves it out, so tests pass in both modes.
 */
export const SOURCE_NOTE = /^baton: running from the TypeScript sources \(slower start\): [^\n]*\n/;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `baton …` against `databaseUrl` (null: no database settings at all, as on a fresh machine);
 * `env` adds to or overrides the environment. Exit codes come back, they do not throw.
 */
export async function runBaton(args: string[], o: { databaseUrl: string | null; env?: Record<string, string>; cwd?: string; stdin?: string }): Promise<CliResult> {
  const { BATON_DATABASE_URL: _url, ...rest } = process.env;
  const env = { ...rest, BATON_LOG_LEVEL: 'warn', ...(o.databaseUrl !== null && { BATON_DATABASE_URL: o.databaseUrl }), ...o.env };
  try {
    const running = run(process.execPath, [BIN, ...args], { env, cwd: o.cwd ?? process.cwd(), timeout: 60_000 });
    // Without `stdin` the child's stdin is an open pipe nobody writes to, as before.
    if (o.stdin !== undefined) running.child.stdin?.end(o.stdin);
    const { stdout, stderr } = await running;
    return { code: 0, stdout, stderr: stderr.replace(SOURCE_NOTE, '') };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, stdout: e.stdout ?? '', stderr: (e.stderr ?? '').replace(SOURCE_NOTE, '') };
  }
}
