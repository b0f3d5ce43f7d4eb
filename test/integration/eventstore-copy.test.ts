// `baton eventstore copy` as a user runs it (real processes), Postgres → Postgres: every stream
// arrives with the same ids, types, data, metadata and revisions, in the source's global order;
// a copy stopped midway resumes without duplicates, even when its checkpoint is behind what the
// target already holds or lost altogether; copying again changes nothing; a target holding other
// events, or a checkpoint that belongs to another target, is refused with a message saying why.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/db/connect.ts';
import { START, type EventStore, type NewEvent, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { runBaton, type CliResult } from '../support/cli.ts';
import { createTestDatabase, useTestDatabase, type TestDatabase } from '../support/test-db.ts';

const source = useTestDatabase();
let scratch: string;
let sourceStore: EventStore;
const TOTAL = 420;
const STREAMS = 37;

/** Deterministic choices, so a failure reproduces. */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

async function readEverything(store: EventStore): Promise<StoredEvent[]> {
  const all: StoredEvent[] = [];
  await store.settled?.(); // a transaction open in another test file's database must not cut the read short
  for (let after = START; ; ) {
    const page = await store.readAll({ after, limit: 1000 });
    if (page.length === 0) return all;
    all.push(...page);
    after = page[page.length - 1]!.globalPosition;
  }
}

/** What a copy must keep; global positions and recordedAt are each store's own. */
const essence = (e: StoredEvent) => ({ eventId: e.eventId, streamId: e.streamId, revision: e.revision, type: e.type, data: e.data, metadata: e.metadata });

async function copy(target: TestDatabase, args: string[] = [], env: Record<string, string> = {}): Promise<CliResult> {
  return runBaton(['eventstore', 'copy', '--from', source().url, '--to', target.url, ...args], { databaseUrl: null, env: { BATON_DATA_DIR: scratch, ...env } });
}
const json = (r: CliResult) => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { read: number; appended: number; alreadyPresent: number; streamsCreated: number; complete: boolean; resumed: boolean; checkpoint: string };
};

const targets: TestDatabase[] = [];
async function newTarget(): Promise<{ db: TestDatabase; store: EventStore }> {
  const db = await createTestDatabase({ max: 2 });
  targets.push(db);
  return { db, store: createPostgresEventStore(db.pool) };
}

beforeAll(async () => {
  scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-copy-'));
  sourceStore = createPostgresEventStore(source().pool);
  const pick = rng(8);
  const revisions = new Map<string, bigint>();
  const event = (n: number, streamId: string): NewEvent => ({
    eventId: randomUUID(),
    type: ['ThingRequested', 'ThingMoved', 'ThingNoted', 'ThingEnded'][pick(4)]!,
    data: { n, streamId, nested: { list: [n, String(n), null, { deep: n % 2 === 0 }] }, text: `é ✓ "quoted" ${n}` },
    metadata: { by: pick(2) === 0 ? 'executor' : 'worker:w1', correlationId: randomUUID(), occurredAt: new Date(1_700_000_000_000 + n).toISOString() },
  });
  async function appendSome(streamId: string, count: number, n: number): Promise<void> {
    const at = revisions.get(streamId);
    revisions.set(streamId, (at ?? -1n) + BigInt(count));
    await sourceStore.append(streamId, Array.from({ length: count }, (_, i) => event(n + i, streamId)), { expectedRevision: at ?? 'no_stream' });
  }
  // Half one writer at a time, half four writers at once on their own streams (transactions that
  // commit out of position order: the copy must keep the order readAll delivers, not positions).
  let n = 0;
  while (n < TOTAL / 2) {
    const count = Math.min(1 + pick(3), TOTAL / 2 - n);
    await appendSome(`copytest-${pick(STREAMS)}`, count, n);
    n += count;
  }
  await Promise.all(
    [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; i < TOTAL / 8; i += 3) await appendSome(`copytest-${w * 9 + (i % 9)}`, 3, n + w * 1000 + i);
    }),
  );
  const all = await readEverything(sourceStore);
  expect(all).toHaveLength(n + 4 * 3 * Math.ceil(TOTAL / 8 / 3));
});

afterAll(async () => {
  await sourceStore?.close();
  await Promise.all(targets.map((t) => t.drop()));
  await fs.rm(scratch, { recursive: true, force: true });
});

describe('baton eventstore copy (Postgres → Postgres)', () => {
  it('copies every stream with its ids, types, data, metadata and revisions, in the same global order; again, it is a no-op', async () => {
    const { store } = await newTarget();
    const expected = await readEverything(sourceStore);
    const r = await copy(targets[targets.length - 1]!, ['--batch-size', '64']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`${expected.length} events read, ${expected.length} appended \\(\\d+ new streams\\), 0 already in the target`));
    expect(r.stdout).toMatch(/done: the target holds every event the source had/);

    const copied = await readEverything(store);
    expect(copied.map(essence)).toEqual(expected.map(essence));
    const streams = [...new Set(expected.map((e) => e.streamId))];
    for (const s of streams) expect((await store.readStream(s)).map(essence)).toEqual((await sourceStore.readStream(s)).map(essence));

    // The default checkpoint (in BATON_DATA_DIR) makes the same command a quick no-op …
    const again = json(await copy(targets[targets.length - 1]!, ['--json']));
    expect(again).toMatchObject({ read: 0, appended: 0, alreadyPresent: 0, complete: true, resumed: true });
    expect(path.dirname(again.checkpoint)).toBe(scratch);
    // … and without it (another machine, a deleted file) everything is recognised by id.
    const reread = json(await copy(targets[targets.length - 1]!, ['--json', '--checkpoint', path.join(scratch, 'none-yet.json')]));
    expect(reread).toMatchObject({ read: expected.length, appended: 0, alreadyPresent: expected.length, streamsCreated: 0, complete: true, resumed: false, targetHeld: expected.length });
    expect((await readEverything(store)).map(essence)).toEqual(expected.map(essence));
  });

  it('resumes a copy stopped midway without duplicates, even from a checkpoint older than the target', async () => {
    const { db, store } = await newTarget();
    const expected = await readEverything(sourceStore);
    const checkpoint = path.join(scratch, 'interrupted.json');

    const first = json(await copy(db, ['--json', '--checkpoint', checkpoint, '--batch-size', '50', '--limit', '120']));
    expect(first).toMatchObject({ read: 120, appended: 120, alreadyPresent: 0, complete: false });
    expect((await readEverything(store)).map(essence)).toEqual(expected.slice(0, 120).map(essence));

    // A crash after appending, before saving the checkpoint: the target is ahead of it.
    const stale = await fs.readFile(checkpoint, 'utf8');
    const second = json(await copy(db, ['--json', '--checkpoint', checkpoint, '--batch-size', '50', '--limit', '75']));
    expect(second).toMatchObject({ read: 75, appended: 75, complete: false, resumed: true });
    await fs.writeFile(checkpoint, stale);

    // Resumed with another batch size, so runs split differently from the ones appended.
    // The target's own earlier events are this copy's: taken, and said in the summary.
    const rest = json(await copy(db, ['--json', '--checkpoint', checkpoint, '--batch-size', '7']));
    expect(rest).toMatchObject({ read: expected.length - 120, alreadyPresent: 75, appended: expected.length - 195, complete: true, resumed: true, targetHeld: 195 });
    const copied = await readEverything(store);
    expect(new Set(copied.map((e) => e.eventId)).size).toBe(copied.length);
    expect(copied.map(essence)).toEqual(expected.map(essence));
  });

  it('Ctrl-C midway finishes the batch in progress, says how far it got and exits 130; the same command then goes on', async () => {
    const { db, store } = await newTarget();
    const expected = await readEverything(sourceStore);
    const checkpoint = path.join(scratch, 'ctrl-c.json');
    const { BATON_DATABASE_URL: _url, ...env } = process.env;
    const child = spawn(process.execPath, [path.resolve('bin/baton.js'), 'eventstore', 'copy', '--from', source().url, '--to', db.url, '--batch-size', '1', '--checkpoint', checkpoint, '--json'], {
      env: { ...env, BATON_DATA_DIR: scratch, BATON_LOG_LEVEL: 'warn' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await expect.poll(() => fs.stat(checkpoint).then(() => true, () => false), { timeout: 30_000, interval: 10 }).toBe(true);
    child.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    expect(stderr).toMatch(/baton: Ctrl-C: stopping after the batch of events in progress/);
    const out = JSON.parse(stdout) as { read: number; complete: boolean; interrupted: string };
    expect(out).toMatchObject({ complete: false, interrupted: 'Ctrl-C' });
    expect(out.read).toBeLessThan(expected.length);
    // The checkpoint says what the target holds: nothing appended after it.
    expect(JSON.parse(await fs.readFile(checkpoint, 'utf8')).read).toBe((await readEverything(store)).length);
    const rest = json(await copy(db, ['--json', '--checkpoint', checkpoint]));
    expect(rest).toMatchObject({ read: expected.length - out.read, alreadyPresent: 0, complete: true, resumed: true });
    expect((await readEverything(store)).map(essence)).toEqual(expected.map(essence));
  });

  it('refuses a checkpoint that belongs to another target, and a target that holds other events', async () => {
    const done = path.join(scratch, 'done.json');
    const a = await newTarget();
    expect((await copy(a.db, ['--checkpoint', done, '--limit', '30'])).code).toBe(0);

    // The same checkpoint pointed at a fresh database (it names its pair of URLs, so rename it).
    const b = await newTarget();
    const text = JSON.parse(await fs.readFile(done, 'utf8')) as { to: string };
    const forB = path.join(scratch, 'for-b.json');
    await fs.writeFile(forB, JSON.stringify({ ...text, to: redactUrl(b.db.url) }));
    const refused = await copy(b.db, ['--checkpoint', forB]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/the checkpoint says event [0-9a-f-]{36} \(copytest-\d+ at revision \d+\) was copied, but the target does not have it/);
    expect(await readEverything(b.store)).toEqual([]);

    // A target whose stream already holds a different event where the source's first one belongs.
    const c = await newTarget();
    const [firstEvent] = await readEverything(sourceStore);
    await c.store.append(firstEvent!.streamId, [{ eventId: randomUUID(), type: 'SomethingElse', data: {}, metadata: {} }], { expectedRevision: 'no_stream' });
    const conflict = await copy(c.db, ['--checkpoint', path.join(scratch, 'conflict.json')]);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toContain(`cannot copy ${firstEvent!.streamId} at revision 0: the target already holds event`);
    expect(await readEverything(c.store)).toHaveLength(1); // refused before writing anything

    // The same event id with other contents (two stores that made a keyed execution's first event
    // from the same key): refused, never counted as copied with the source's later events after it.
    const d = await newTarget();
    await d.store.append(firstEvent!.streamId, [{ eventId: firstEvent!.eventId, type: firstEvent!.type, data: { other: true }, metadata: firstEvent!.metadata }], { expectedRevision: 'no_stream' });
    const spliced = await copy(d.db, ['--checkpoint', path.join(scratch, 'spliced.json')]);
    expect(spliced.code).toBe(1);
    expect(spliced.stderr).toContain(`cannot copy ${firstEvent!.streamId} at revision 0: the target already holds event ${firstEvent!.eventId} there with other contents (${firstEvent!.type} against the source's ${firstEvent!.type}, other data or metadata)`);
    expect((await d.store.readStream(firstEvent!.streamId)).map((e) => e.data)).toEqual([{ other: true }]);
  });

  it('refuses, before writing anything, a target holding streams of its own, naming one; the text summary says what a target held', async () => {
    // Another installation's store: its own worker stream. The copy appended thousands of events
    // into it, then stopped part-way on a collision (or merged the two without a word).
    const own = await newTarget();
    const theirs = [{ eventId: randomUUID(), type: 'WorkerStarted', data: {}, metadata: {} }, { eventId: randomUUID(), type: 'WorkerBeat', data: {}, metadata: {} }];
    await own.store.append('worker-w1', theirs, { expectedRevision: 'no_stream' });
    const refused = await copy(own.db, ['--checkpoint', path.join(scratch, 'own.json')]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `baton: the target already holds events that are not from this source: its first, ${theirs[0]!.eventId} (WorkerStarted), is stream worker-w1 at revision 0, which the source does not have; ` +
        'copy into an empty event store, or into the one an earlier copy from this source wrote\n',
    );
    expect((await readEverything(own.store)).map((e) => e.eventId)).toEqual(theirs.map((e) => e.eventId));

    const resumed = await newTarget();
    expect((await copy(resumed.db, ['--checkpoint', path.join(scratch, 'held.json'), '--limit', '40'])).code).toBe(0);
    const again = await copy(resumed.db, ['--checkpoint', path.join(scratch, 'held.json')]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^the target already held 40 events before this run$/m);
  });

  it('refuses one store under two spellings (a parameter added, localhost for 127.0.0.1), asking the server; another schema of it is another store', async () => {
    const url = new URL(source().url);
    const spellings = [`${source().url}?application_name=elsewhere`, Object.assign(new URL(url), { hostname: 'localhost' }).toString()];
    const before = (await readEverything(sourceStore)).length;
    for (const to of spellings) {
      const r = await runBaton(['eventstore', 'copy', '--from', source().url, '--to', to], { databaseUrl: null, env: { BATON_DATA_DIR: scratch } });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `baton: --from (${redactUrl(source().url)}) and --to (${redactUrl(to)}) reach the same event store: the same baton_events table in database ${url.pathname.slice(1)}; ` +
          'copy into another database, or another schema (?options=-c%20search_path%3D<schema>)\n',
      );
    }
    expect(await readEverything(sourceStore)).toHaveLength(before);
    // The same database, another schema: another installation, copied into.
    const other = await runBaton(['eventstore', 'copy', '--from', source().url, '--to', `${source().url}?options=-c%20search_path%3Dcopytest`, '--limit', '5', '--json'], { databaseUrl: null, env: { BATON_DATA_DIR: scratch } });
    expect(json(other)).toMatchObject({ read: 5, appended: 5 });
  });
});

it("settled() that gives up on a transaction held open says which one (its pid, database and age), not only the xid it waited for", async () => {
  const other = await createTestDatabase({ max: 1 });
  const holder = await other.pool.connect();
  const store = createPostgresEventStore(source().pool);
  try {
    // A write transaction in another database on the same server: it holds back the order of events.
    await holder.query('BEGIN');
    const pid = (await holder.query<{ pid: number; xid: string }>('SELECT pg_backend_pid() AS pid, txid_current()::text AS xid')).rows[0]!.pid;
    await source().pool.query('SELECT txid_current()'); // a later one that ended: settled() waits for those before it
    const err = await store.settled!({ timeoutMs: 300 }).then(() => undefined, (e: unknown) => e as Error);
    expect(err?.message).toMatch(/did not all end within 300 ms: every transaction that writes on this Postgres server, in any database, holds back the order of events until it ends; the oldest open: .*pid \d+ in database /);
    expect(err?.message).toContain(`pid ${pid} in database "${other.name}"`);
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
    await store.close();
    await other.drop();
  }
});
