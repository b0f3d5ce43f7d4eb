// isAlive: a process that ended but was not yet reaped (a zombie, as a container's slow init
// leaves one after kill -9) is gone; a live one and one we may not signal are alive.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isAlive } from '../../src/process/identity.ts';
import { until } from '../support/until.ts';

describe.runIf(process.platform === 'linux')('isAlive', () => {
  it('is false for a zombie, true for a running process and for pid 1', async () => {
    // The shell backgrounds a child, prints its pid and becomes `sleep`, which never reaps it.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      const pid = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()))));
      const state = () => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];
      await until('the child to end unreaped', () => state() === 'Z', 10_000);
      expect(isAlive(pid)).toBe(false);
      expect(isAlive(parent.pid!)).toBe(true);
      expect(isAlive(process.pid)).toBe(true);
      expect(isAlive(1)).toBe(true);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
