// The scheduling pass's view of the liveness table: one query per maxAgeMs, ages carried forward,
// and a worker's own change (invalidate) asks again at once.
import { describe, expect, it } from 'vitest';
import { cachedDirectory, type LiveWorker, type WorkerDirectory } from '../../src/executor/worker-directory.ts';

const worker = (workerId: string, ageMs = 0): LiveWorker => ({ workerId, actions: ['a'], runtimes: ['node'], capacity: 1, draining: false, ageMs, heartbeatAt: new Date(0) });

function directory(rows: LiveWorker[][]) {
  let queries = 0;
  const inner: WorkerDirectory = { list: async () => rows[Math.min(queries++, rows.length - 1)]! };
  return { inner, queries: () => queries };
}

describe('cachedDirectory', () => {
  it('asks the liveness table at most once per maxAgeMs, carrying ages forward by the clock', async () => {
    let t = 1_000;
    const d = directory([[worker('w1', 10)], [worker('w1', 0), worker('w2', 0)]]);
    const cached = cachedDirectory(d.inner, 250, () => t);
    expect(await cached.list()).toEqual([worker('w1', 10)]);
    t += 100;
    expect(await cached.list()).toEqual([worker('w1', 110)]);
    expect(d.queries()).toBe(1);
    t += 150;
    expect((await cached.list()).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(d.queries()).toBe(2);
  });

  it('asks again at once after invalidate (a worker started), and concurrent passes share one query', async () => {
    const t = 0;
    const d = directory([[worker('w1')], [worker('w1'), worker('w2')]]);
    const cached = cachedDirectory(d.inner, 10_000, () => t);
    const [a, b] = await Promise.all([cached.list(), cached.list()]);
    expect(a).toEqual(b);
    expect(d.queries()).toBe(1);
    cached.invalidate();
    expect((await cached.list()).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(d.queries()).toBe(2);
  });
});
