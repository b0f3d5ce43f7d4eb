// The projector process a benchmark starts (src/bench/projector-process.ts) does not outlive the
// process that started it when that one calls process.exit without stopping it, as the peers
// harness's worker process does when a phase times out.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const run = promisify(execFile);
const db = useTestDatabase();

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the bench projector process', () => {
  it('is killed when the process that started it exits', { timeout: 60_000 }, async () => {
    const script = path.resolve('test/fixtures/bench/projector-then-exit.ts');
    const child = await run(process.execPath, ['--import', 'tsx', script], { env: { ...process.env, BATON_DATABASE_URL: db().url }, timeout: 45_000 }).catch(
      (err: { code?: number; stdout?: string; stderr?: string }) => err,
    );
    expect(child.stdout, `the script's output; stderr: ${child.stderr}`).toMatch(/^\d+\n$/);
    expect((child as { code?: number }).code).toBe(2);
    const pid = Number(child.stdout!.trim());
    await until('the projector process to be gone', () => !alive(pid), 10_000);
    expect(alive(pid)).toBe(false);
  });
});
