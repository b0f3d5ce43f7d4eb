// `baton verify --expect <file>` takes execution ids as every other command does: in either case,
// or as the `execution-<uuid>` stream id. Compared as written, an upper-case id of an execution
// that exists was reported lost (and the stream-id form refused).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
let scratch: string;
beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-verify-expect-'));
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('baton verify --expect', () => {
  it('finds an expected execution named in upper case or by its stream id; a missing one is still lost', async () => {
    const runtime = createExecutionRuntime(createPostgresEventStore(db().pool));
    const a = (await runtime.submit({ action: 'core.noop' })).executionId;
    const b = (await runtime.submit({ action: 'core.noop' })).executionId;
    const file = path.join(scratch, 'expected.txt');
    await fs.writeFile(file, `# submitted\n${a.toUpperCase()}\nexecution-${b.toUpperCase()}\n`);
    const ok = await runBaton(['verify', '--no-read-model', '--expect', file], { databaseUrl: db().url });
    expect(ok.stdout).toMatch(/, 0 lost,/);
    expect(ok.code, `${ok.stdout}\n${ok.stderr}`).toBe(0);

    const missing = '0000000A-0000-4000-8000-00000000000B';
    await fs.writeFile(file, `${a.toUpperCase()}\n${missing}\n`);
    const lost = await runBaton(['verify', '--no-read-model', '--expect', file, '--json'], { databaseUrl: db().url });
    expect(lost.code).toBe(1);
    expect(lost.stdout).toContain(missing.toLowerCase());
    expect(lost.stdout).not.toContain(a);
  });

  it('still refuses a line that is no execution id, quoting it', async () => {
    const file = path.join(scratch, 'bad.txt');
    await fs.writeFile(file, 'execution-nope\n');
    const r = await runBaton(['verify', '--expect', file], { databaseUrl: db().url });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`baton: --expect: ${file} holds 1 line(s) that are not execution ids, first: "execution-nope"\n`);
  });
});
