// The scheduling pass's view of the liveness table: one query per maxAgeMs, asked again in the
// background while the held list serves (up to a stale limit), ages carried forward, and a
// worker's own change (invalidate) asks again at once.
import { describe, expect, it } from 'vitest';
import { cachedDirectory, type LiveWorker, type WorkerDirectory } from '../../src/executor/worker-directory.ts';

const worker = (workerId: string, ageMs = 0): LiveWorker => ({ workerId, actions: ['a'], runtimes: ['node'], capacity: 1, draining: false, ageMs, heartbeatAt: new Date(0) });

/** Past the background query's delay (BACKGROUND_ASK_DELAY_MS) and its answer. */
const backgroundAsked = () => new Promise((r) => setTimeout(r, 30));

function directory(rows: LiveWorker[][]) {
  let queries = 0;
  const inner: WorkerDirectory = { list: async () => rows[Math.min(queries++, rows.length - 1)]! };
  return { inner, queries: () => queries };
}

describe('cachedDirectory', () => {
  it('asks the liveness table at most once per maxAgeMs, carrying ages forward by the clock', async () => {
    let t = 1_000;
    const d = directory([[worker('w1', 10)], [worker('w1', 0), worker('w2', 0)]]);
    const cached = cachedDirectory(d.inner, 250, { now: () => t });
    expect(await cached.list()).toEqual([worker('w1', 10)]);
    t += 100;
    expect(await cached.list()).toEqual([worker('w1', 110)]);
    expect(d.queries()).toBe(1);
    t += 150;
    // Past maxAgeMs: the pass goes on with the list held (aged), while it is asked again, after the pass's appends.
    expect(await cached.list()).toEqual([worker('w1', 260)]);
    expect(d.queries()).toBe(1);
    await backgroundAsked();
    expect(d.queries()).toBe(2);
    expect((await cached.list()).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(d.queries()).toBe(2);
  });

  it('waits for a fresh list once the one held is older than the stale limit, and after a failed refresh', async () => {
    let t = 0;
    let fail = false;
    let queries = 0;
    const inner: WorkerDirectory = {
      list: async () => {
        queries++;
        if (fail) throw new Error('liveness table unreachable');
        return [worker('w1')];
      },
    };
    const cached = cachedDirectory(inner, 250, { now: () => t, staleLimitMs: 1_000 });
    await cached.list();
    fail = true;
    t = 600; // stale: asked in the background, which fails; the held list still serves
    expect(await cached.list()).toEqual([worker('w1', 600)]);
    await backgroundAsked();
    expect(queries).toBe(2);
    t = 1_000; // past the stale limit: the pass waits for the query, and hears of its failure
    await expect(cached.list()).rejects.toThrow(/unreachable/);
    fail = false;
    expect(await cached.list()).toEqual([worker('w1', 0)]);
  });

  it('asks again at once after invalidate (a worker started), and concurrent passes share one query', async () => {
    const t = 0;
    const d = directory([[worker('w1')], [worker('w1'), worker('w2')]]);
    const cached = cachedDirectory(d.inner, 10_000, { now: () => t });
    const [a, b] = await Promise.all([cached.list(), cached.list()]);
    expect(a).toEqual(b);
    expect(d.queries()).toBe(1);
    cached.invalidate();
    expect((await cached.list()).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(d.queries()).toBe(2);
  });

  it('tells onChanged when a background answer differs from the one before in who may get work', async () => {
    let t = 0;
    let changes = 0;
    const draining = { ...worker('w1'), draining: true };
    const d = directory([[draining], [{ ...draining, ageMs: 5 }], [worker('w1')]]);
    const cached = cachedDirectory(d.inner, 250, { now: () => t, onChanged: () => changes++ });
    await cached.list();
    t = 300;
    await cached.list(); // the pass goes on with w1 draining; the refresh finds only its age moved
    await backgroundAsked();
    expect(changes).toBe(0);
    t = 600;
    expect((await cached.list())[0]!.draining).toBe(true);
    await backgroundAsked();
    expect(changes).toBe(1); // its first beat cleared draining: a pass must look again
    expect((await cached.list())[0]!.draining).toBe(false);
  });

  it('after leftWaiting, asks again once the list is maxAgeMs old, with no pass to ask', async () => {
    let changes = 0;
    const draining = { ...worker('w1'), draining: true };
    const d = directory([[draining], [worker('w1')]]);
    const cached = cachedDirectory(d.inner, 30, { onChanged: () => changes++ });
    await cached.list();
    cached.leftWaiting(); // the pass placed nothing with w1 draining
    cached.leftWaiting(); // once per wait
    expect(d.queries()).toBe(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(d.queries()).toBe(2);
    expect(changes).toBe(1);
    expect((await cached.list())[0]!.draining).toBe(false);
  });

  it('after leftWaiting with a list already old, asks at once rather than after the usual delay', async () => {
    let t = 0;
    const d = directory([[{ ...worker('w1'), draining: true }], [worker('w1')]]);
    const cached = cachedDirectory(d.inner, 250, { now: () => t });
    await cached.list();
    t = 1_000;
    await cached.list(); // old: asked in the background, after the pass's appends
    cached.leftWaiting(); // but the pass placed nothing: ask now
    await new Promise((r) => setTimeout(r, 0));
    expect(d.queries()).toBe(2);
  });

  it('invalidate cancels a background query due to start, and the next pass asks', async () => {
    let t = 0;
    const d = directory([[worker('w1')], [worker('w1'), worker('w2')]]);
    const cached = cachedDirectory(d.inner, 250, { now: () => t });
    await cached.list();
    t = 300;
    await cached.list(); // a background query due in a few ms
    cached.invalidate(); // w2 announced itself; its row may not be written yet
    await backgroundAsked();
    expect(d.queries()).toBe(1);
    expect((await cached.list()).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(d.queries()).toBe(2);
  });

  it('does not answer a pass after invalidate with a query asked before it', async () => {
    let release!: () => void;
    const answers = [new Promise<LiveWorker[]>((r) => (release = () => r([worker('w1')]))), Promise.resolve([worker('w1'), worker('w2')])];
    let queries = 0;
    const cached = cachedDirectory({ list: () => answers[queries++]! }, 250, { now: () => 0 });
    const before = cached.list(); // in flight, from before the change
    cached.invalidate(); // w2 started
    const after = cached.list();
    release();
    expect((await before).map((w) => w.workerId)).toEqual(['w1']);
    expect((await after).map((w) => w.workerId)).toEqual(['w1', 'w2']);
    expect(queries).toBe(2);
  });
});
