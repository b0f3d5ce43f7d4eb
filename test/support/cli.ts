// Running the `baton` command line as a child process, to the end, for CLI tests.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BIN = path.resolve('bin/baton.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `baton …` against `databaseUrl` (null: no database settings at all, as on a fresh machine);
 * `env` adds to or overrides the environment. Exit codes come back, they do not throw.
 */
export async function runBaton(args: string[], o: { databaseUrl: string | null; env?: Record<string, string>; cwd?: string }): Promise<CliResult> {
  const { BATON_DATABASE_URL: _url, ...rest } = process.env;
  const env = { ...rest, BATON_LOG_LEVEL: 'warn', ...(o.databaseUrl !== null && { BATON_DATABASE_URL: o.databaseUrl }), ...o.env };
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env, cwd: o.cwd ?? process.cwd(), timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== 'number') throw err;
    return { code: e.code, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}
