// PgWakeups against the real Postgres: a LISTEN that fails after its connection was taken from
// the pool must give that connection back, or every reconnect attempt leaks one. And how the
// event store's appends NOTIFY: a lone one inside its own statement, overlapping ones after.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { PgWakeups } from '../../src/eventstore/pg-wakeups.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { useTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const db = useTestDatabase();

/** pool.end() waits for every checked-out connection: a leaked one makes it hang, so bound it. */
async function endPool(pool: pg.Pool): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`pool.end() did not finish: ${pool.totalCount - pool.idleCount} connection(s) never released`)), 3_000);
  });
  try {
    await Promise.race([pool.end(), hung]);
  } finally {
    clearTimeout(timer);
  }
}


describe('PgWakeups', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  it('releases the connection when LISTEN fails after connect, and listens once a connection works', { timeout: 20_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 10 });
    cleanup.push(() => endPool(pool));
    // The first two connections end themselves before LISTEN runs: the server terminates the
    // backend, so the LISTEN queued behind it fails on a connection the pool handed out.
    let toKill = 2;
    pool.on('connect', (client) => {
      if (toKill-- > 0) client.query('SELECT pg_terminate_backend(pg_backend_pid())').catch(() => undefined);
    });
    const wakeups = new PgWakeups(pool, undefined, 'wakeups_test');
    cleanup.push(() => wakeups.close());
    const payloads: string[] = [];
    wakeups.onPayload((p) => payloads.push(p));

    await wakeups.ensureListening(); // the first attempt fails; reconnects follow every second
    const other = db().pool; // notifies from outside the pool under test
    await until('a LISTEN that works', async () => {
      await other.query(`SELECT pg_notify('wakeups_test', 'ping')`);
      return payloads.includes('ping');
    }, 10_000);

    expect(toKill).toBeLessThan(0); // both killed connections were tried
    // One connection stays out, the listener's; the failed ones went back (and were discarded).
    expect(pool.totalCount - pool.idleCount, 'connections checked out of the pool').toBe(1);
    const { rows } = await other.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
    );
    expect(rows[0]!.n).toBe(1);
  });

  it('close() after a failed LISTEN leaves nothing checked out', { timeout: 10_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 10 });
    cleanup.push(() => endPool(pool));
    pool.on('connect', (client) => {
      client.query('SELECT pg_terminate_backend(pg_backend_pid())').catch(() => undefined);
    });
    const wakeups = new PgWakeups(pool, undefined, 'wakeups_test');
    await wakeups.ensureListening();
    await wakeups.close();
    expect(pool.totalCount - pool.idleCount).toBe(0);
  });

  it('wakes its own waiters directly and ignores the echo of its own NOTIFY; another instance wakes on it', { timeout: 15_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 4 });
    cleanup.push(() => endPool(pool));
    const mine = new PgWakeups(pool, undefined, 'echo_test');
    const theirs = new PgWakeups(pool, undefined, 'echo_test');
    cleanup.push(() => theirs.close());
    cleanup.push(() => mine.close());
    await Promise.all([mine.ensureListening(), theirs.ensureListening()]);
    const [mineBefore, theirsBefore] = [mine.seq, theirs.seq];
    mine.appended();
    expect(mine.seq).toBe(mineBefore + 1); // at once, no round trip
    await until('the other instance to wake on the NOTIFY', () => theirs.seq > theirsBefore, 10_000);
    // Notifications reach a listener in the order sent: once a later one from elsewhere has
    // arrived, the echo of ours has been handled (and must not have woken anyone again).
    const heard: string[] = [];
    mine.onPayload((p) => heard.push(p));
    await db().pool.query(`SELECT pg_notify('echo_test', 'marker')`);
    await until('the marker', () => heard.includes('marker'), 10_000);
    expect(mine.seq).toBe(mineBefore + 2);
  });

  it('an append that commits while the NOTIFY before it is ending still sends its own (it was left for a loop that had already ended)', { timeout: 30_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 4 });
    cleanup.push(() => endPool(pool));
    const mine = new PgWakeups(pool, undefined, 'again_test');
    const theirs = new PgWakeups(db().pool, undefined, 'again_test');
    cleanup.push(() => theirs.close());
    cleanup.push(() => mine.close());
    await theirs.ensureListening();
    // The next NOTIFY's result runs `then` a few microtasks after it arrives: the second append
    // lands at every offset across the end of the first's send.
    let then: (() => void) | undefined;
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<unknown>;
    (pool as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = (...args) => {
      const sent = query(...args);
      const after = then;
      then = undefined;
      if (after) void sent.then(() => after());
      return sent;
    };
    for (let offset = 0; offset < 12; offset++) {
      const before = theirs.seq;
      then = () => void (async () => {
        for (let i = 0; i < offset; i++) await null;
        mine.appended();
      })();
      mine.appended();
      await until(`both NOTIFYs, the second ${offset} microtasks after the first's answer`, () => theirs.seq >= before + 2, 3_000);
    }
  });

  it('a NOTIFY that carries events reaches its payload listeners, and what they start in microtasks, before it wakes the followers; one without wakes them as well', { timeout: 15_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 4 });
    cleanup.push(() => endPool(pool));
    const wakeups = new PgWakeups(pool, undefined, 'order_test');
    cleanup.push(() => wakeups.close());
    await wakeups.ensureListening();
    const order: string[] = [];
    // As the executor acts on heard events: a chain of microtasks ending in what it sends.
    wakeups.onPayload((p) => {
      order.push(`heard ${p.split('\n')[1] ?? ''}`);
      void Promise.resolve().then(() => Promise.resolve()).then(() => order.push('acted'));
    });
    const alarm = wakeups.alarm();
    const rung = async (what: string) => {
      await alarm.wait(10_000);
      order.push(`woken after ${what}`);
      alarm.reset();
    };
    let woken = rung('events');
    // A sender id, then the lines a hinted append adds (pg-append-hints.ts).
    await db().pool.query(`SELECT pg_notify('order_test', 'someone-else' || E'\\n' || 'with-events' || E'\\n1:1\\n{}')`);
    await woken;
    expect(order).toEqual(['heard with-events', 'acted', 'woken after events']);
    order.length = 0;
    woken = rung('a plain NOTIFY');
    await db().pool.query(`SELECT pg_notify('order_test', 'someone-else')`);
    await woken;
    // Nothing to act on first: the followers are woken at once (the order against the listener's own microtasks is not fixed).
    expect(order).toEqual(expect.arrayContaining(['heard ', 'woken after a plain NOTIFY']));
  });

  it('shares one LISTEN connection per pool across channels, and re-listens all of them when it is lost', { timeout: 20_000 }, async () => {
    // Every NOTIFY wakes every backend that LISTENs in the database, whatever its channel: a host
    // with a connection per channel paid that once per channel.
    const pool = new pg.Pool({ connectionString: db().url, max: 6 });
    cleanup.push(() => endPool(pool));
    const channels = ['shared_a', 'shared_b', 'shared_c'];
    const wakeups = channels.map((c) => new PgWakeups(pool, undefined, c));
    for (const w of wakeups) cleanup.push(() => w.close());
    const heard = new Map<string, string[]>(channels.map((c) => [c, []]));
    wakeups.forEach((w, i) => w.onPayload((p) => heard.get(channels[i]!)!.push(p)));
    await Promise.all(wakeups.map((w) => w.ensureListening()));
    const other = db().pool;
    const listening = async () =>
      (await other.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`)).rows.map((r) => r.pid);
    const [pid] = await listening();
    expect(await listening()).toEqual([pid]);
    expect(pool.totalCount - pool.idleCount, 'connections checked out of the pool').toBe(1);
    for (const c of channels) await other.query(`SELECT pg_notify($1, 'first')`, [c]);
    await until('every channel to hear its first notification', () => channels.every((c) => heard.get(c)!.includes('first')), 10_000);
    expect(channels.map((c) => heard.get(c))).toEqual(channels.map(() => ['first'])); // each only its own

    // The shared connection dies: all three are listened to again, and each instance is woken (a re-read).
    const seqs = wakeups.map((w) => w.seq);
    await other.query('SELECT pg_terminate_backend($1)', [pid]);
    await until('every channel to hear again', async () => {
      for (const c of channels) await other.query(`SELECT pg_notify($1, 'again')`, [c]);
      return channels.every((c) => heard.get(c)!.includes('again'));
    }, 10_000);
    wakeups.forEach((w, i) => expect(w.seq).toBeGreaterThan(seqs[i]!));
    expect((await listening()).length).toBe(1);

    // Closing all gives the connection up.
    for (const w of wakeups) await w.close();
    expect(pool.totalCount - pool.idleCount).toBe(0);
    await until('the LISTEN backend to end', async () => (await listening()).length === 0, 5_000);
  });

  it('a lone append NOTIFYs inside its own statement (one statement, one commit); appends that overlap, or that nobody elsewhere waits for, NOTIFY after their commit', { timeout: 15_000 }, async () => {
    const pool = new pg.Pool({ connectionString: db().url, max: 8 });
    cleanup.push(() => endPool(pool));
    // Every statement the store sends, as the real pool runs it.
    const texts: string[] = [];
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    pool.query = ((...args: unknown[]) => {
      const q = args[0];
      texts.push(typeof q === 'string' ? q : (q as { text: string }).text);
      return query(...args);
    }) as typeof pool.query;
    const store = createPostgresEventStore(pool);
    cleanup.push(() => store.close());
    const listener = new pg.Client({ connectionString: db().url });
    await listener.connect();
    cleanup.push(() => listener.end());
    const heard: number[] = [];
    listener.on('notification', (n) => n.channel === 'baton_events' && heard.push(n.processId));
    await listener.query('LISTEN baton_events');
    const event = () => [{ eventId: randomUUID(), type: 'Probe', data: {}, metadata: {} }];

    texts.length = 0;
    await store.append(`probe-${randomUUID()}`, event(), { expectedRevision: 'no_stream' });
    expect(texts).toHaveLength(1);
    expect(texts[0]).toMatch(/INSERT INTO baton_events[\s\S]*pg_notify\(/);
    await until('the append to wake a listener elsewhere', () => heard.length === 1, 10_000);

    texts.length = 0;
    await Promise.all(Array.from({ length: 40 }, () => store.append(`probe-${randomUUID()}`, event(), { expectedRevision: 'no_stream' })));
    const batches = texts.filter((t) => t.includes('baton_append_many('));
    expect(batches.length).toBeGreaterThan(0);
    expect(batches.filter((t) => t.includes('pg_notify'))).toEqual([]);
    expect(texts.some((t) => /^SELECT pg_notify\('baton_events'/.test(t.trim()))).toBe(true);

    // A lone append nobody elsewhere waits for (an executor's handoff): its NOTIFY follows the commit.
    await until('the overlapping appends to be heard', async () => {
      const before = heard.length;
      await new Promise((r) => setTimeout(r, 50));
      return heard.length === before;
    }, 10_000);
    const heardBefore = heard.length;
    texts.length = 0;
    await store.append(`probe-${randomUUID()}`, event(), { expectedRevision: 'no_stream', othersWait: false });
    const appends = texts.filter((t) => t.includes('INSERT INTO baton_events'));
    expect(appends).toHaveLength(1);
    expect(appends[0]).not.toMatch(/pg_notify/);
    await until('its NOTIFY, after the commit, to wake a listener elsewhere', () => heard.length > heardBefore, 10_000);
    expect(texts.some((t) => /^SELECT pg_notify\('baton_events'/.test(t.trim()))).toBe(true);
  });
});
