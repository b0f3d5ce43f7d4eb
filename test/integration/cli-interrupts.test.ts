// Long CLI work stopped by a signal, as a person (Ctrl-C) or a deploy tool (SIGTERM) stops it:
// `projections rebuild` drops its aside schema, says so and exits 143, rather than leave a copy of
// the read model for `projections status` to list as a leftover; `retention run` finishes the
// batch in progress, says how far it got and exits 130, and running it again goes on.
// (`eventstore copy`'s case is in eventstore-copy.test.ts.)
import { spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { mapLimit } from '../../src/async/map-limit.ts';
import { cancelExecution } from '../../src/runtime/cancel.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore } from '../support/test-store.ts';

const t = useTestStore({ max: 4 });

/** The CLI in a process of its own, to be signalled. */
function baton(args: string[]) {
  const { BATON_DATABASE_URL: _url, ...env } = process.env;
  const child = spawn(process.execPath, [path.resolve('bin/baton.js'), ...args], { env: { ...env, BATON_DATABASE_URL: t.db.url, BATON_LOG_LEVEL: 'error' } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { process: child, exited, stdout: () => stdout, stderr: () => stderr };
}

it('SIGTERM during a rebuild drops its aside schema and exits 143', { timeout: 120_000 }, async () => {
  // Enough history that the rebuild is still running when its aside schema appears.
  const runtime = createExecutionRuntime(t.store);
  for (let i = 0; i < 40; i++) await runtime.submitMany(Array.from({ length: 1_000 }, () => ({ action: 'core.noop', input: null })));
  const child = baton(['projections', 'rebuild', 'executions']);
  const aside = async () => (await t.db.pool.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'baton_rebuild_executions'`)).rowCount === 1;
  await expect.poll(aside, { timeout: 60_000, interval: 20 }).toBe(true);
  child.process.kill('SIGTERM');
  expect(await child.exited, child.stderr()).toBe(143);
  expect(child.stderr()).toMatch(/interrupted \(SIGTERM\): cleaning up…\ndropped scratch schema\(s\) baton_rebuild_executions/);
  expect(await aside()).toBe(false);
});

it('Ctrl-C during a retention run finishes the batch in progress, says how far it got and exits 130; running it again goes on', { timeout: 120_000 }, async () => {
  const runtime = createExecutionRuntime(t.store);
  const ended = (await runtime.submitMany(Array.from({ length: 1_000 }, () => ({ action: 'core.noop', input: null })))).map((o) => (o.ok ? o.result.executionId : o.executionId));
  await mapLimit(ended, 16, (id) => cancelExecution(runtime, id, 'done with it'));
  await catchUpFully(t.db.pool, t.store);
  await new Promise((r) => setTimeout(r, 1_100)); // finished more than 1 s ago
  const archive = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-interrupted-archive-'));
  try {
    const child = baton(['retention', 'run', '--older-than', '1s', '--archive', archive]);
    await expect.poll(async () => (await fs.readdir(archive, { recursive: true })).some((f) => String(f).endsWith('.json')), { timeout: 60_000, interval: 10 }).toBe(true);
    child.process.kill('SIGINT');
    expect(await child.exited, child.stderr()).toBe(130);
    expect(child.stderr()).toMatch(/baton: Ctrl-C: stopping after the batch in progress/);
    expect(child.stdout()).toMatch(/^archived [\d,]+ executions .*\nstopped by Ctrl-C before the end: run the same command again to go on/);
    const archived = Number(/^archived ([\d,]+) executions/.exec(child.stdout())![1]!.replace(/,/g, ''));
    expect(archived).toBeLessThan(1_000);
    const again = await runBaton(['retention', 'run', '--older-than', '1s', '--archive', archive], { databaseUrl: t.db.url });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`^archived ${(1_000 - archived).toLocaleString('en')} executions`));
    const verify = await runBaton(['verify'], { databaseUrl: t.db.url });
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  } finally {
    await fs.rm(archive, { recursive: true, force: true });
  }
});
