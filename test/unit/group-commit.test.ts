// The group committer's batching rules, against a commit function the test controls.
import { describe, expect, it } from 'vitest';
import { GroupCommitter } from '../../src/eventstore/group-commit.ts';
import type { AppendOutcome, AppendRequest } from '../../src/eventstore/event-store.ts';
import { WrongExpectedRevisionError } from '../../src/errors.ts';

const ev = (n = 1) => Array.from({ length: n }, (_, i) => ({ eventId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, type: 'E', data: {}, metadata: {} }));

/** A commit function whose transactions stay in flight until the test ends them. */
function controlledStore() {
  const calls: { requests: readonly AppendRequest[]; origin: object | undefined; othersWait: boolean | undefined; finish(outcomes?: AppendOutcome[] | Error): void }[] = [];
  const revisions = new Map<string, bigint>();
  const commit = (requests: readonly AppendRequest[], o: { origin?: object; othersWait?: boolean } = {}) =>
    new Promise<AppendOutcome[]>((resolve, reject) => {
      calls.push({
        requests,
        origin: o.origin,
        othersWait: o.othersWait,
        finish(given) {
          if (given instanceof Error) return reject(given);
          resolve(
            given ??
              requests.map((r): AppendOutcome => {
                const at = revisions.get(r.streamId) ?? -1n;
                const expected = r.expectedRevision === 'no_stream' ? -1n : r.expectedRevision;
                if (expected !== 'any' && expected !== at) return { ok: false, error: new WrongExpectedRevisionError(r.streamId, r.expectedRevision, at < 0n ? 'no_stream' : at) };
                const next = at + BigInt(r.events.length);
                revisions.set(r.streamId, next);
                return { ok: true, result: { nextExpectedRevision: next, lastPosition: next, idempotentReplay: false } };
              }),
          );
        },
      });
    });
  return { calls, commit };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('GroupCommitter', () => {
  it('sends a lone append at once, without waiting for company', () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    void c.append('a', ev(), { expectedRevision: 'no_stream' });
    expect(calls.length).toBe(1); // synchronously: no timer, no tick
    expect(calls[0]!.requests.map((r) => r.streamId)).toEqual(['a']);
  });

  it('coalesces appends that arrive while a transaction is in flight into the next one', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    const first = c.append('a', ev(), { expectedRevision: 'no_stream' });
    const rest = ['b', 'c', 'd'].map((s) => c.append(s, ev(2), { expectedRevision: 'no_stream' }));
    expect(calls.length).toBe(1);
    calls[0]!.finish();
    expect((await first).nextExpectedRevision).toBe(0n);
    await tick();
    expect(calls.length).toBe(2);
    expect(calls[1]!.requests.map((r) => r.streamId)).toEqual(['b', 'c', 'd']);
    calls[1]!.finish();
    expect((await Promise.all(rest)).map((r) => r.nextExpectedRevision)).toEqual([1n, 1n, 1n]);
  });

  /**
   * Three transactions with one in flight at a time: the first round's appends alone, the second's
   * coalesced while it is in flight, the third's while the second is. The store's calls, in order.
   */
  async function threeTransactions(rounds: ((c: GroupCommitter) => Promise<unknown>[])[]) {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    const all = [...rounds[0]!(c), ...rounds[1]!(c)];
    calls[0]!.finish();
    await tick();
    all.push(...rounds[2]!(c));
    calls[1]!.finish();
    await tick();
    calls[2]!.finish();
    await Promise.all(all);
    return calls;
  }

  it('names the appender of a transaction only when all its appends have the same one', async () => {
    const [mine, theirs] = [{ appender: 'mine' }, { appender: 'theirs' }];
    const calls = await threeTransactions([
      (c) => [c.append('a', ev(), { expectedRevision: 'no_stream', origin: mine })],
      (c) => ['b', 'c'].map((s) => c.append(s, ev(), { expectedRevision: 'no_stream', origin: mine })),
      (c) => [
        c.append('d', ev(), { expectedRevision: 'no_stream', origin: mine }),
        c.append('e', ev(), { expectedRevision: 'no_stream', origin: theirs }),
        c.append('f', ev(), { expectedRevision: 'no_stream' }),
      ],
    ]);
    expect(calls.map((x) => [x.requests.map((r) => r.streamId).join(''), x.origin])).toEqual([
      ['a', mine],
      ['bc', mine],
      ['def', undefined], // mixed, or one of them unnamed: anyone's
    ]);
  });

  it('tells other processes at once when any append of a transaction has someone waiting for it (the default)', async () => {
    const calls = await threeTransactions([
      (c) => [c.append('a', ev(), { expectedRevision: 'no_stream', othersWait: false })],
      (c) => ['b', 'c'].map((s) => c.append(s, ev(), { expectedRevision: 'no_stream', othersWait: false })),
      (c) => [c.append('d', ev(), { expectedRevision: 'no_stream', othersWait: false }), c.append('e', ev(), { expectedRevision: 'no_stream' })],
    ]);
    expect(calls.map((x) => [x.requests.map((r) => r.streamId).join(''), x.othersWait])).toEqual([
      ['a', false],
      ['bc', false],
      ['de', true],
    ]);
  });

  it('bounds a batch at maxBatch; the rest goes in the next transaction', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxBatch: 3, maxInFlight: 1 });
    const all = ['x', 'a', 'b', 'c', 'd', 'e'].map((s) => c.append(s, ev(), { expectedRevision: 'no_stream' }));
    calls[0]!.finish();
    await tick();
    expect(calls[1]!.requests.map((r) => r.streamId)).toEqual(['a', 'b', 'c']);
    calls[1]!.finish();
    await tick();
    expect(calls[2]!.requests.map((r) => r.streamId)).toEqual(['d', 'e']);
    calls[2]!.finish();
    await Promise.all(all);
  });

  it('never puts two appends of one stream in a transaction: the second sees the first, as if sequential', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    const busy = c.append('busy', ev(), { expectedRevision: 'no_stream' });
    const s1 = c.append('s', ev(), { expectedRevision: 'no_stream' });
    const s2 = c.append('s', ev(), { expectedRevision: 0n }); // expects s1 stored
    const s3 = c.append('s', ev(), { expectedRevision: 0n }); // stale once s2 is stored
    const other = c.append('t', ev(), { expectedRevision: 'no_stream' });
    calls[0]!.finish();
    await busy;
    await tick();
    expect(calls[1]!.requests.map((r) => r.streamId)).toEqual(['s', 't']);
    calls[1]!.finish();
    await Promise.all([s1, other]);
    await tick();
    expect(calls[2]!.requests.map((r) => r.streamId)).toEqual(['s']);
    calls[2]!.finish();
    expect((await s2).nextExpectedRevision).toBe(1n);
    await tick();
    calls[3]!.finish();
    await expect(s3).rejects.toBeInstanceOf(WrongExpectedRevisionError);
  });

  it('fails only the callers of a transaction that fails, and goes on with the next', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    const first = c.append('a', ev(), { expectedRevision: 'no_stream' });
    const second = [c.append('b', ev(), { expectedRevision: 'no_stream' }), c.append('c', ev(), { expectedRevision: 'no_stream' })];
    calls[0]!.finish(new Error('connection lost'));
    await expect(first).rejects.toThrow('connection lost');
    await tick();
    calls[1]!.finish();
    expect((await Promise.all(second)).length).toBe(2);
  });

  it('gives each caller its own outcome from a batch', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 1 });
    const lead = c.append('lead', ev(), { expectedRevision: 'no_stream' });
    const good = c.append('g', ev(), { expectedRevision: 'no_stream' });
    const bad = c.append('h', ev(), { expectedRevision: 4n });
    calls[0]!.finish();
    await lead;
    await tick();
    calls[1]!.finish();
    expect((await good).nextExpectedRevision).toBe(0n);
    await expect(bad).rejects.toBeInstanceOf(WrongExpectedRevisionError);
  });

  it('keeps up to maxInFlight transactions in flight, and never two of one stream at once', async () => {
    const { calls, commit } = controlledStore();
    const c = new GroupCommitter(commit, { maxInFlight: 2 });
    const a1 = c.append('a', ev(), { expectedRevision: 'no_stream' });
    const a2 = c.append('a', ev(), { expectedRevision: 0n }); // waits for a1: not in flight beside it
    const b = c.append('b', ev(), { expectedRevision: 'no_stream' });
    const x = c.append('x', ev(), { expectedRevision: 'no_stream' });
    // Each lone append takes a free slot at once; x finds both taken and waits.
    expect(calls.map((k) => k.requests.map((r) => r.streamId))).toEqual([['a'], ['b']]);
    calls[1]!.finish();
    await b;
    await tick();
    expect(calls[2]!.requests.map((r) => r.streamId)).toEqual(['x']); // a2 still waits for a1
    calls[0]!.finish();
    await a1;
    await tick();
    expect(calls[3]!.requests.map((r) => r.streamId)).toEqual(['a']);
    calls[2]!.finish();
    calls[3]!.finish();
    await x;
    expect((await a2).nextExpectedRevision).toBe(1n);
  });
});
