// A BATON_DATA_DIR that cannot be created (under /proc, where Node's recursive mkdir spun for ever
// at full CPU) stops `baton dev` and a command that would start the embedded Postgres at once,
// with one line naming the directory and why: no hang, no stack trace.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runBaton } from '../support/cli.ts';

const env = { BATON_DATABASE_URL: '', BATON_DATA_DIR: '/proc/baton-test-data' };

// Needs Linux's /proc; skipped where there is none.
describe.skipIf(!existsSync('/proc/self'))('a BATON_DATA_DIR under /proc (skipped where there is no /proc)', () => {
  it('`baton dev` and `baton list` refuse it at once in one line', async () => {
    const [dev, list] = await Promise.all([runBaton(['dev', '--workers', '1'], { databaseUrl: null, env }), runBaton(['list'], { databaseUrl: null, env })]);
    expect(dev.code).toBe(1);
    expect(dev.stderr).toBe("baton: BATON_DATA_DIR: cannot create /proc/baton-test-data: ENOENT: no such file or directory, mkdir '/proc/baton-test-data'\n");
    expect(list.code).toBe(1);
    expect(list.stderr).toBe(
      "baton: cannot start the embedded Postgres: cannot create its data directory /proc/baton-test-data (ENOENT: no such file or directory, mkdir '/proc/baton-test-data'). " +
        'Set BATON_DATA_DIR to a directory that can be written, or set BATON_DATABASE_URL to use an existing server.\n',
    );
  });
});
