// Worker liveness against real Postgres: the upsert, the candidate query (by the DB's clock)
// and the heartbeat loop.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InvalidEventError } from '../../src/errors.ts';
import { HeartbeatLoop } from '../../src/liveness/heartbeat-loop.ts';
import {
  HEARTBEAT_INTERVAL_MS,
  STALE_AFTER_INTERVALS,
  createLivenessStore,
  staleAfterMs,
  type LivenessStore,
  type WorkerBeat,
} from '../../src/liveness/liveness-store.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();
let store: LivenessStore;

beforeEach(async () => {
  await db().pool.query('DELETE FROM baton_worker_liveness');
  store = createLivenessStore(db().pool);
});

const beat = (workerId: string, over: Partial<WorkerBeat> = {}): WorkerBeat => ({
  workerId,
  actions: ['core.noop', 'http.request'],
  runtimes: ['node'],
  capacity: 4,
  inFlight: 0,
  draining: false,
  ...over,
});

/** Move a worker's last heartbeat `seconds` into the past, as if it had stopped beating then. */
const age = (workerId: string, seconds: number) =>
  db().pool.query(`UPDATE baton_worker_liveness SET heartbeat_at = now() - $2 * interval '1 second' WHERE worker_id = $1`, [
    workerId,
    seconds,
  ]);

/** Poll `check` until it passes; fail after `ms`. For waiting on a background loop, never a fixed sleep. */
async function eventually(check: () => Promise<void> | void, ms = 5_000): Promise<void> {
  const deadline = performance.now() + ms;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (performance.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

describe('defaults', () => {
  it('beats every 10 s and calls a worker stale after three missed beats', () => {
    expect(HEARTBEAT_INTERVAL_MS).toBe(10_000);
    expect(STALE_AFTER_INTERVALS).toBe(3);
    expect(staleAfterMs()).toBe(30_000);
    expect(staleAfterMs(2_000)).toBe(6_000);
  });
});

describe('LivenessStore', () => {
  it('inserts on the first beat and updates on the next', async () => {
    await store.beat(beat('w1', { pid: 100, host: 'h1' }), { starting: true });
    const [first] = await store.list();
    expect(first).toMatchObject({
      workerId: 'w1',
      actions: ['core.noop', 'http.request'],
      runtimes: ['node'],
      capacity: 4,
      inFlight: 0,
      draining: false,
      pid: 100,
      host: 'h1',
    });
    expect(first!.heartbeatAt).toBeInstanceOf(Date);
    expect(first!.ageMs).toBeGreaterThanOrEqual(0);
    expect(first!.ageMs).toBeLessThan(5_000);

    await age('w1', 5);
    await store.beat(beat('w1', { inFlight: 3, draining: true, capacity: 8, actions: ['core.sleep'] }));
    const rows = await store.list();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ inFlight: 3, draining: true, capacity: 8, actions: ['core.sleep'], pid: null, host: null });
    expect(rows[0]!.heartbeatAt.getTime()).toBeGreaterThan(first!.heartbeatAt.getTime());
    expect(rows[0]!.ageMs).toBeLessThan(4_000);
  });

  it('keeps started_at across beats; a starting beat resets it', async () => {
    await store.beat(beat('w1'), { starting: true });
    await db().pool.query(`UPDATE baton_worker_liveness SET started_at = now() - interval '1 hour'`);
    await store.beat(beat('w1'));
    const [kept] = await store.list();
    expect(Date.now() - kept!.startedAt.getTime()).toBeGreaterThan(3_500_000);
    await store.beat(beat('w1'), { starting: true });
    const [reset] = await store.list();
    expect(Date.now() - reset!.startedAt.getTime()).toBeLessThan(60_000);
  });

  it('measures age by the database clock', async () => {
    await store.beat(beat('w1'));
    await age('w1', 42);
    const [row] = await store.list();
    expect(row!.ageMs).toBeGreaterThanOrEqual(42_000);
    expect(row!.ageMs).toBeLessThan(47_000);
  });

  it('refuses a malformed beat, naming the field', async () => {
    await expect(store.beat(beat('w1', { capacity: 0 }))).rejects.toThrow(InvalidEventError);
    await expect(store.beat(beat('w1', { inFlight: -1 }))).rejects.toThrow(/inFlight: Too small/);
    await expect(store.beat(beat('has space'))).rejects.toThrow(/workerId: /);
    expect(await store.list()).toEqual([]);
  });

  it('removes a row', async () => {
    await store.beat(beat('w1'));
    await store.beat(beat('w2'));
    expect(await store.remove('w1')).toBe(true);
    expect(await store.remove('w1')).toBe(false);
    expect((await store.list()).map((r) => r.workerId)).toEqual(['w2']);
  });

  describe('candidates', () => {
    it('offers only live, non-draining workers with the action and a free slot', async () => {
      await store.beat(beat('ok'));
      await store.beat(beat('stale'));
      await age('stale', 60);
      await store.beat(beat('draining', { draining: true }));
      await store.beat(beat('other-action', { actions: ['core.sleep'] }));
      await store.beat(beat('full', { capacity: 2, inFlight: 2 }));
      await store.beat(beat('almost-full', { capacity: 2, inFlight: 1 }));
      expect((await store.candidates('core.noop', 30_000)).map((w) => w.workerId)).toEqual(['ok', 'almost-full']);
      expect((await store.candidates('core.sleep', 30_000)).map((w) => w.workerId)).toEqual(['other-action']);
      expect(await store.candidates('core.nobody', 30_000)).toEqual([]);
    });

    it('judges staleness by staleAfterMs against the database clock', async () => {
      await store.beat(beat('ten-seconds-old'));
      await age('ten-seconds-old', 10);
      expect((await store.candidates('core.noop', 30_000)).map((w) => w.workerId)).toEqual(['ten-seconds-old']);
      expect(await store.candidates('core.noop', 5_000)).toEqual([]);
      // A fresh beat brings it back.
      await store.beat(beat('ten-seconds-old'));
      expect((await store.candidates('core.noop', 5_000)).map((w) => w.workerId)).toEqual(['ten-seconds-old']);
    });

    it('orders least loaded first: by in_flight/capacity, then in_flight, then worker id', async () => {
      await store.beat(beat('b-quarter-1', { capacity: 4, inFlight: 1 }));
      await store.beat(beat('a-quarter-2', { capacity: 8, inFlight: 2 }));
      await store.beat(beat('z-idle', { capacity: 2, inFlight: 0 }));
      await store.beat(beat('m-idle', { capacity: 16, inFlight: 0 }));
      await store.beat(beat('c-half', { capacity: 2, inFlight: 1 }));
      await store.beat(beat('B-quarter-1', { capacity: 4, inFlight: 1 }));
      expect((await store.candidates('core.noop', 30_000)).map((w) => w.workerId)).toEqual([
        'm-idle',
        'z-idle',
        // Equal ratio and in-flight: by id in byte order ("B" < "b"), whatever the server's locale.
        'B-quarter-1',
        'b-quarter-1',
        'a-quarter-2',
        'c-half',
      ]);
    });

    it('refuses a staleness limit that is not a positive number', async () => {
      await expect(store.candidates('core.noop', 0)).rejects.toThrow(RangeError);
      await expect(store.candidates('core.noop', Number.NaN)).rejects.toThrow(/staleAfterMs must be a positive number/);
    });
  });
});

describe('LivenessStore.claim (taking a worker id before announcing it)', () => {
  const neverGone = { staleAfterMs: 30_000, holderIsGone: () => false };
  const row = async (workerId: string) =>
    (await db().pool.query('SELECT pid, host, draining FROM baton_worker_liveness WHERE worker_id = $1', [workerId])).rows[0];

  it('takes a free id with a draining row (no work until the first real beat), and refuses it to the next process', async () => {
    expect(await store.claim(beat('w1', { pid: 101, host: 'a' }), neverGone)).toEqual({ claimed: true });
    expect(await row('w1')).toEqual({ pid: 101, host: 'a', draining: true });
    expect(await store.candidates('core.noop', 30_000)).toEqual([]);

    const refused = await store.claim(beat('w1', { pid: 202, host: 'b' }), neverGone);
    expect(refused).toMatchObject({ claimed: false, holder: { workerId: 'w1', pid: 101, host: 'a' } });
    expect(await row('w1')).toEqual({ pid: 101, host: 'a', draining: true }); // untouched
  });

  it('takes the id of a worker that went silent, or whose process is known to be gone', async () => {
    await store.beat(beat('w1', { pid: 101, host: 'a' }), { starting: true });
    await age('w1', 31);
    expect(await store.claim(beat('w1', { pid: 202, host: 'b' }), neverGone)).toEqual({ claimed: true });
    expect(await row('w1')).toMatchObject({ pid: 202, host: 'b' });

    // Fresh, but the judge says its process is gone (same host, dead pid).
    expect(await store.claim(beat('w1', { pid: 303, host: 'b' }), { staleAfterMs: 30_000, holderIsGone: (h) => h.pid === 202 })).toEqual({ claimed: true });
    expect(await row('w1')).toMatchObject({ pid: 303 });
  });

  it('lets exactly one of several processes claiming one id at once have it', async () => {
    const results = await Promise.all([1, 2, 3, 4, 5].map((pid) => store.claim(beat('race', { pid, host: 'h' }), neverGone)));
    expect(results.filter((r) => r.claimed)).toHaveLength(1);
    const winner = (await row('race')).pid;
    for (const r of results) if (!r.claimed) expect(r.holder.pid).toBe(winner);
  });
});

describe('HeartbeatLoop', () => {
  const loops: HeartbeatLoop[] = [];
  const track = (loop: HeartbeatLoop) => (loops.push(loop), loop);
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(loops.splice(0).map((l) => l.stop()));
  });

  /** A store that counts beats and passes them to the real one. */
  const counting = () => {
    const beats: WorkerBeat[] = [];
    /** When each beat reached the store. */
    const startedAt: number[] = [];
    return {
      beats,
      startedAt,
      store: { beat: async (w: WorkerBeat, o?: { starting?: boolean }) => (beats.push(w), startedAt.push(performance.now()), store.beat(w, o)) },
    };
  };

  it('beats at once, then every interval, and not after stop()', async () => {
    const { beats, store: s } = counting();
    const loop = track(new HeartbeatLoop({ store: s, state: () => beat('w1'), intervalMs: 40, minGapMs: 0 }));
    loop.start();
    await eventually(async () => expect((await store.list()).map((r) => r.workerId)).toEqual(['w1']));
    await eventually(() => expect(beats.length).toBeGreaterThanOrEqual(3));
    expect(loop.status()).toMatchObject({ running: true, consecutiveFailures: 0 });
    await loop.stop();
    expect(loop.status().running).toBe(false);
    const after = beats.length;
    // A timing test: three intervals without a beat show the timer is gone.
    await new Promise((r) => setTimeout(r, 120));
    expect(beats.length).toBe(after);
  });

  it('marks only the first successful beat as starting', async () => {
    const starts: boolean[] = [];
    const loop = track(
      new HeartbeatLoop({
        store: { beat: async (w, o) => void starts.push(o?.starting === true) },
        state: () => beat('w1'),
        intervalMs: 60_000,
        minGapMs: 0,
      }),
    );
    loop.start();
    await loop.beatNow();
    await loop.beatNow();
    expect(starts).toEqual([true, false, false]);
  });

  it('tells afterBeat how long it was since the previous successful beat (a pause shows as a long gap)', async () => {
    const gaps: (number | null)[] = [];
    let failing = false;
    const loop = track(
      new HeartbeatLoop({
        store: {
          beat: async () => {
            if (failing) throw new Error('database down');
          },
        },
        state: () => beat('w1'),
        intervalMs: 60_000,
        minGapMs: 0,
        afterBeat: (gap) => gaps.push(gap),
      }),
    );
    loop.start();
    await loop.beatNow();
    failing = true;
    await loop.beatNow(); // failed: not reported
    failing = false;
    await new Promise((r) => setTimeout(r, 150));
    await loop.beatNow();
    expect(gaps[0]).toBeNull();
    expect(gaps).toHaveLength(3);
    expect(gaps[2]).toBeGreaterThanOrEqual(140); // since the last success, across the failure
  });

  it('beatNow() pushes the current state at once', async () => {
    let inFlight = 0;
    const loop = track(new HeartbeatLoop({ store, state: () => beat('w1', { inFlight }), intervalMs: 60_000, minGapMs: 0 }));
    loop.start();
    await loop.beatNow();
    expect((await store.list())[0]?.inFlight).toBe(0);
    inFlight = 3;
    await loop.beatNow();
    expect((await store.list())[0]?.inFlight).toBe(3);
  });

  it('merges requests made while a beat is in flight into one more beat', async () => {
    const { beats, store: s } = counting();
    const loop = track(new HeartbeatLoop({ store: s, state: () => beat('w1'), intervalMs: 60_000, minGapMs: 0 }));
    loop.start();
    await loop.beatNow();
    const before = beats.length;
    await Promise.all([loop.beatNow(), loop.beatNow(), loop.beatNow(), loop.beatNow(), loop.beatNow()]);
    // The first starts a beat at once; the other four arrive while it runs and share the next one.
    expect(beats.length - before).toBe(2);
  });

  it('spaces pushed beats by minGapMs', async () => {
    const { beats, startedAt, store: s } = counting();
    const loop = track(new HeartbeatLoop({ store: s, state: () => beat('w1'), intervalMs: 60_000, minGapMs: 100 }));
    loop.start();
    await loop.beatNow(); // start()'s beat was in flight, so this took a second one
    expect(beats.length).toBe(2);
    await loop.beatNow();
    expect(beats.length).toBe(3);
    // The gap runs from one beat's start to the next's, whatever the store took: measured from
    // the end of the second beat (as this test once did) it fell short whenever the store was slow.
    // A timer may fire up to a millisecond early by performance.now().
    expect(startedAt[1]! - startedAt[0]!).toBeGreaterThanOrEqual(99);
    expect(startedAt[2]! - startedAt[1]!).toBeGreaterThanOrEqual(99);
  });

  it('logs failures instead of throwing, and recovers', async () => {
    const lines: { level: number; msg: string; consecutiveFailures?: number; err?: { message: string } }[] = [];
    const log = pino(
      { level: 'debug' },
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          lines.push(JSON.parse(chunk.toString()));
          cb();
        },
      }),
    );
    let failing = true;
    const loop = track(
      new HeartbeatLoop({
        store: {
          beat: async (w, o) => {
            if (failing) throw new Error('database unreachable');
            await store.beat(w, o);
          },
        },
        state: () => beat('w1'),
        intervalMs: 60_000,
        minGapMs: 0,
        log,
      }),
    );
    loop.start();
    await loop.beatNow();
    await loop.beatNow();
    expect(loop.status()).toMatchObject({ running: true, consecutiveFailures: 3, lastSuccessAt: null });
    await eventually(() => expect(lines.filter((l) => l.msg === 'heartbeat failed')).toHaveLength(3));
    expect(lines[0]).toMatchObject({ level: 40, msg: 'heartbeat failed', consecutiveFailures: 1, err: { message: 'database unreachable' } });
    expect(lines[1]).toMatchObject({ level: 20 }); // repeats go to debug
    failing = false;
    await loop.beatNow();
    expect(loop.status()).toMatchObject({ consecutiveFailures: 0 });
    expect(loop.status().lastSuccessAt).toBeInstanceOf(Date);
    // Still the first success: started_at is set by it.
    expect((await store.list())[0]?.workerId).toBe('w1');
  });

  it('a state() that throws counts as a failed beat', async () => {
    const loop = track(
      new HeartbeatLoop({
        store,
        state: () => {
          throw new Error('no state');
        },
        intervalMs: 60_000,
        minGapMs: 0,
      }),
    );
    loop.start();
    await loop.beatNow();
    expect(loop.status().consecutiveFailures).toBeGreaterThanOrEqual(1);
  });

  it('stop() waits for the beat in flight and leaves no timer behind', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    let release!: () => void;
    const pending = new Promise<void>((r) => (release = r));
    const calls: number[] = [];
    const loop = new HeartbeatLoop({
      store: { beat: () => (calls.push(1), pending) },
      state: () => beat('w1'),
      intervalMs: 1_000,
      minGapMs: 0,
    });
    loop.start();
    expect(calls).toHaveLength(1);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await Promise.resolve();
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(stopped).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(calls).toHaveLength(1);
    // beatNow() after stop() does nothing and does not hang.
    await loop.beatNow();
    expect(calls).toHaveLength(1);
  });

  it('refuses nonsense intervals', () => {
    expect(() => new HeartbeatLoop({ store, state: () => beat('w1'), intervalMs: 0 })).toThrow(/intervalMs must be a positive number/);
    expect(() => new HeartbeatLoop({ store, state: () => beat('w1'), minGapMs: -1 })).toThrow(/minGapMs/);
  });
});

describe('namespaces and transport, as the row\'s own process said them', () => {
  it('reads them as not said once a worker of an earlier build takes the row over (it rewrites the pid, not them)', async () => {
    await store.beat(beat('w-x', { pid: 111, transport: 'nats', namespaces: ['team-a'] }), { starting: true });
    expect((await store.list())[0]).toMatchObject({ workerId: 'w-x', pid: 111, transport: 'nats', namespaces: ['team-a'] });
    // What an earlier build's claim and heartbeat write: pid and the rest, never the new columns.
    await db().pool.query(`UPDATE baton_worker_liveness SET pid = 222, started_at = now(), heartbeat_at = now() WHERE worker_id = 'w-x'`);
    expect((await store.list())[0]).toMatchObject({ workerId: 'w-x', pid: 222, transport: null, namespaces: null });
    // …so it serves every namespace, as that build's workers do.
    expect((await store.offering(['core.noop'], 30_000)).get('core.noop')).toEqual({ ready: 1, draining: 0, readyEverywhere: 1, readyNamespaces: [] });
    // This build's next beat says them again.
    await store.beat(beat('w-x', { pid: 333, transport: 'postgres' }));
    expect((await store.list())[0]).toMatchObject({ pid: 333, transport: 'postgres', namespaces: null });
  });
});
