// A beat left by an executor process on this host that no longer exists counts as stale at
// once; live processes, this process and other hosts keep their age.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { HOST_IDENTITY, withGoneLocalProcesses } from '../../src/executor/partitions/executor-beats.ts';

const beat = (executorId: string, pid: number | null, host: string | null) => ({ executorId, draining: false, ageMs: 1_500, heartbeatAt: new Date(), pid, host });

describe('withGoneLocalProcesses', () => {
  it('marks a gone local process stale, and nothing else', () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid!; // exited and reaped
    const [dead, self, parent, elsewhere, unknown] = withGoneLocalProcesses([
      beat('dead', gone, HOST_IDENTITY),
      beat('self', process.pid, HOST_IDENTITY),
      beat('parent', process.ppid, HOST_IDENTITY),
      beat('elsewhere', gone, 'another-host/pid:[1]'),
      beat('unknown', null, null),
    ]);
    expect(dead!.ageMs).toBe(Number.POSITIVE_INFINITY);
    expect([self, parent, elsewhere, unknown].map((b) => b!.ageMs)).toEqual([1_500, 1_500, 1_500, 1_500]);
  });
});
