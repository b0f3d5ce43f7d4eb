// The partition lease machine (actors/partition-lease.machine.ts) and the lease planner
// (src/executor/partitions/lease-plan.ts): who may claim, release and take over which
// partition, and what each executor appends next for fair shares, drains and stale holders.
import { describe, expect, it } from 'vitest';
import { decidePartitionLease, foldPartitionLeases, partitionsOf, startPartitionLeases, type PartitionLeaseSnapshot } from '../../actors/partition-lease.machine.ts';
import { partitionOf, planLeases, type ExecutorBeat, type LeaseCommand } from '../../src/executor/partitions/lease-plan.ts';
import type { PartitionEvent } from '../../schemas/partition-events.ts';

const at = '2026-11-24T07:00:00.000Z';
const ev = (c: LeaseCommand): PartitionEvent => ({ ...c, metadata: { by: 'executor', occurredAt: at } }) as PartitionEvent;
const claim = (executorId: string, partitions: number[], partitionCount = 4) => ev({ type: 'PartitionsClaimed', data: { executorId, partitionCount, partitions } });
const release = (executorId: string, partitions: number[]) => ev({ type: 'PartitionsReleased', data: { executorId, partitions, reason: 'rebalance' } });
const takeover = (executorId: string, from: string, partitions: number[]) => ev({ type: 'PartitionsTakenOver', data: { executorId, from, partitions, lastHeartbeatAt: null } });

function apply(s: PartitionLeaseSnapshot, e: PartitionEvent): PartitionLeaseSnapshot {
  const d = decidePartitionLease(s, e);
  if (!d.ok) throw new Error(d.reason);
  return d.snapshot;
}
const refusal = (s: PartitionLeaseSnapshot, e: PartitionEvent) => {
  const d = decidePartitionLease(s, e);
  return d.ok ? null : d.reason;
};

describe('partition lease machine', () => {
  it('fixes the partition count with the first claim and refuses another count', () => {
    const s = apply(startPartitionLeases(), claim('a', [0, 1]));
    expect(s.context.partitionCount).toBe(4);
    expect(refusal(s, claim('b', [2], 8))).toMatch(/has 4 partitions, not 8/);
    expect(refusal(s, claim('b', [4]))).toMatch(/partition 4 does not exist/);
  });

  it('refuses a claim of a held partition: two executors racing for one partition, one wins', () => {
    const s = apply(startPartitionLeases(), claim('a', [0, 1]));
    expect(refusal(s, claim('b', [1, 2]))).toMatch(/partition 1 is held by a/);
    expect(partitionsOf(apply(s, claim('b', [2, 3])), 'b')).toEqual([2, 3]);
  });

  it('lets only the holder release, and frees what it released', () => {
    const s = apply(startPartitionLeases(), claim('a', [0, 1]));
    expect(refusal(s, release('b', [0]))).toMatch(/held by a, not by b/);
    const after = apply(s, release('a', [1]));
    expect(partitionsOf(after, 'a')).toEqual([0]);
    expect(after.context.owners[1]).toBeUndefined();
  });

  it('takes over only from the actual holder, and never from oneself', () => {
    const s = apply(startPartitionLeases(), claim('a', [0, 1]));
    expect(refusal(s, takeover('b', 'c', [0]))).toMatch(/held by a, not by c/);
    expect(refusal(s, takeover('a', 'a', [0]))).toMatch(/own partitions/);
    const after = apply(s, takeover('b', 'a', [0, 1]));
    expect(partitionsOf(after, 'b')).toEqual([0, 1]);
    // The second of two executors that judged a stale at once decides again and is refused.
    expect(refusal(after, takeover('c', 'a', [0]))).toMatch(/held by b, not by a/);
  });

  it('refuses anything before the first claim, and a partition named twice', () => {
    expect(refusal(startPartitionLeases(), release('a', [0]))).toMatch(/no partition is claimed/);
    expect(refusal(startPartitionLeases(), claim('a', [1, 1]))).toMatch(/named twice/);
  });

  it('folds a stored history, and throws on one it refuses', () => {
    const s = foldPartitionLeases([claim('a', [0, 1, 2, 3]), release('a', [2, 3]), claim('b', [2, 3]), takeover('c', 'b', [3])]);
    expect(s.context.owners).toEqual({ 0: 'a', 1: 'a', 2: 'b', 3: 'c' });
    expect(() => foldPartitionLeases([claim('a', [0]), claim('b', [0])])).toThrow(/event 1 \(PartitionsClaimed\) refused/);
  });
});

const beat = (executorId: string, ageMs = 0, draining = false): ExecutorBeat => ({ executorId, ageMs, draining, heartbeatAt: new Date(Date.parse(at) - ageMs) });
const situation = (me: string, leases: PartitionLeaseSnapshot, beats: ExecutorBeat[], draining = false) => ({ me, leases, partitionCount: 16, beats, staleAfterMs: 30_000, draining });

describe('lease planner', () => {
  it('a single executor claims every partition in its first claim (the zero-configuration default)', () => {
    expect(planLeases(situation('a', startPartitionLeases(), [beat('a')]))).toEqual({ type: 'PartitionsClaimed', data: { executorId: 'a', partitionCount: 16, partitions: [...Array(16).keys()] } });
  });

  it('rebalances when executors join: one over its fair share releases the surplus, the others claim it', () => {
    let s = apply(startPartitionLeases(), claim('a', [...Array(16).keys()], 16));
    const beats = [beat('a'), beat('b'), beat('c')];
    const released = planLeases(situation('a', s, beats))!;
    expect(released).toEqual({ type: 'PartitionsReleased', data: { executorId: 'a', partitions: [6, 7, 8, 9, 10, 11, 12, 13, 14, 15], reason: 'rebalance' } });
    s = apply(s, ev(released));
    s = apply(s, ev(planLeases(situation('b', s, beats))!));
    s = apply(s, ev(planLeases(situation('c', s, beats))!));
    expect([partitionsOf(s, 'a').length, partitionsOf(s, 'b').length, partitionsOf(s, 'c').length]).toEqual([6, 6, 4]);
    for (const me of ['a', 'b', 'c']) expect(planLeases(situation(me, s, beats))).toBeUndefined();
  });

  it('takes over the partitions of an executor whose heartbeat is stale (or missing), up to its share', () => {
    let s = apply(startPartitionLeases(), claim('a', [...Array(8).keys()], 16));
    s = apply(s, claim('b', [8, 9, 10, 11, 12, 13, 14, 15], 16));
    expect(planLeases(situation('b', s, [beat('a', 10_000), beat('b')]))).toBeUndefined();
    const taken = planLeases(situation('b', s, [beat('a', 31_000), beat('b')]));
    expect(taken).toMatchObject({ type: 'PartitionsTakenOver', data: { executorId: 'b', from: 'a', partitions: [0, 1, 2, 3, 4, 5, 6, 7] } });
    expect(planLeases(situation('b', s, [beat('b')]))).toMatchObject({ type: 'PartitionsTakenOver', data: { from: 'a', lastHeartbeatAt: null } });
  });

  it('a draining executor releases all it holds and does not count towards the fair share', () => {
    let s = apply(startPartitionLeases(), claim('a', [0, 1, 2, 3, 4, 5, 6, 7], 16));
    s = apply(s, claim('b', [8, 9, 10, 11, 12, 13, 14, 15], 16));
    expect(planLeases(situation('a', s, [beat('a', 0, true), beat('b')], true))).toEqual({ type: 'PartitionsReleased', data: { executorId: 'a', partitions: [0, 1, 2, 3, 4, 5, 6, 7], reason: 'drain' } });
    // b does not take over a fresh (draining) holder: it waits for the release, then claims.
    expect(planLeases(situation('b', s, [beat('a', 0, true), beat('b')]))).toBeUndefined();
    s = apply(s, release('a', [0, 1, 2, 3, 4, 5, 6, 7]));
    expect(planLeases(situation('b', s, [beat('b')]))).toMatchObject({ type: 'PartitionsClaimed', data: { partitions: [0, 1, 2, 3, 4, 5, 6, 7] } });
  });

  it('keeps the stream\'s partition count over a different configured one', () => {
    const s = apply(startPartitionLeases(), claim('a', [0, 1], 4));
    expect(planLeases({ ...situation('b', s, [beat('a'), beat('b')]), partitionCount: 16 })).toEqual({ type: 'PartitionsClaimed', data: { executorId: 'b', partitionCount: 4, partitions: [2, 3] } });
  });

  it('maps a bucket to the same partition in every process, spread over all of them', () => {
    expect(partitionOf('["a.x",null]', 16)).toBe(partitionOf('["a.x",null]', 16));
    const hit = new Set(Array.from({ length: 400 }, (_, i) => partitionOf(JSON.stringify(['a.x', `k${i}`]), 16)));
    expect(hit.size).toBe(16);
  });
});
