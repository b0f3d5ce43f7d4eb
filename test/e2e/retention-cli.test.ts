// `baton retention run` as a user runs it (real processes): an archive directory that cannot be
// made (under /proc, where Node's recursive mkdir spun for ever) fails at once with the usual
// one-line refusal and removes nothing; the summary counts in the singular when it should.
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { runBaton } from '../support/cli.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore, type TestStore } from '../support/test-store.ts';

let t: TestStore;
let runtime: ExecutionRuntime;
let scratch: string;
const deadline = () => new Date(Date.now() + 600_000).toISOString();

async function completed(): Promise<string> {
  const { executionId } = await runtime.submit({ action: 'core.noop', input: { n: Math.random() } });
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
  ]);
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w1' });
  return executionId;
}

/** Everything so far finished an hour ago, as store and read model see it: no waiting for `--older-than` to pass. */
async function agedAnHour(): Promise<void> {
  await catchUpFully(t.db.pool, t.store);
  await t.db.pool.query("UPDATE baton_events SET recorded_at = recorded_at - interval '1 hour'");
  await t.db.pool.query("UPDATE baton_read.executions SET finished_at = finished_at - interval '1 hour'");
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'baton-retention-cli-'));
});
afterAll(() => rm(scratch, { recursive: true, force: true }));

/** A database of its own for the enclosing block, so what one archives the other does not count. */
function ownStore(): void {
  const store = useTestStore();
  beforeAll(() => {
    t = store;
    runtime = createExecutionRuntime(t.store);
  });
}

describe('baton retention run, an archive that cannot be written', () => {
  ownStore();
  // Needs Linux's /proc, where no directory can be made; skipped where there is none.
  it.skipIf(!existsSync('/proc/self'))('with --archive under /proc fails at once, saying so, and removes nothing (skipped where there is no /proc)', async () => {
    const id = await completed();
    await agedAnHour();
    const started = performance.now();
    const r = await runBaton(['retention', 'run', '--older-than', '1m', '--archive', '/proc/baton-archive/x'], { databaseUrl: t.db.url });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^baton: cannot write the archive in \/proc\/baton-archive\/x: no such directory, and it cannot be created there \(\/proc\/baton-archive\); nothing was removed from the store/);
    expect(r.stderr.trim().split('\n').filter((l) => l.startsWith('baton:'))).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(20_000); // a process start, not a hang until the harness's timeout
    expect(await t.store.readStream(executionStreamId(id))).toHaveLength(5);
    // Archived with a directory that can be made: the summary says "1 execution", not "1 executions".
    const dir = path.join(scratch, 'a', 'b');
    const ok = await runBaton(['retention', 'run', '--older-than', '1m', '--archive', dir], { databaseUrl: t.db.url });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^archived 1 execution and 0 workflows finished before \S+ \(5 events\) to /);
    expect(ok.stderr).toMatch(/: archived 1 execution \(0 workflows\), 5 events, in /);
    expect(await readdir(dir)).toEqual([`execution-${id}.json`]);
  });

});

describe('baton retention run, its summary', () => {
  ownStore();
  it('counts in the plural past one', async () => {
    await completed();
    await completed();
    await agedAnHour();
    const r = await runBaton(['retention', 'run', '--older-than', '1m', '--archive', path.join(scratch, 'two'), '--dry-run'], { databaseUrl: t.db.url });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^would archive 2 executions and 0 workflows finished before \S+ \(10 events\)\n$/);
  });
});
