// What one executor appends to the partition leases next, if anything: pure, from the leases'
// snapshot and who is alive. Each executor runs this on every beat; the lease machine and the
// stream's expected revision settle races (a conflict decides again on the newer snapshot).
//
//   - stopping (drain): release everything held;
//   - fair share: with N live executors each holds at most ceil(P / N); one holding more releases
//     its surplus (the highest partitions), so a joining executor finds free ones to claim;
//   - below its share: claim free partitions, else take over those of one executor whose
//     heartbeat went stale (or that has no liveness row at all);
//   - alone: its share is P, so a single executor takes every partition in its first claim.
import { createHash } from 'node:crypto';
import { partitionsOf, type PartitionLeaseSnapshot } from '../../../actors/partition-lease.machine.ts';
import type { PartitionEvent } from '../../../schemas/partition-events.ts';

/** Which partition decides a concurrency bucket (src/executor/concurrency-slots.ts): a stable hash, the same in every process. */
export function partitionOf(bucket: string, partitionCount: number): number {
  return createHash('sha256').update(bucket).digest().readUInt32BE(0) % partitionCount;
}

/** An executor's liveness as the planner reads it. */
export interface ExecutorBeat {
  executorId: string;
  draining: boolean;
  /** By the database's clock. */
  ageMs: number;
  heartbeatAt: Date;
}

export interface LeaseSituation {
  me: string;
  leases: PartitionLeaseSnapshot;
  /** The configured count (BATON_PARTITIONS); the stream's, once a claim fixed it, wins. */
  partitionCount: number;
  beats: readonly ExecutorBeat[];
  staleAfterMs: number;
  /** This executor is stopping: give everything back. */
  draining: boolean;
}

type Data<T extends PartitionEvent['type']> = Extract<PartitionEvent, { type: T }>['data'];
export type LeaseCommand =
  | { type: 'PartitionsClaimed'; data: Data<'PartitionsClaimed'> }
  | { type: 'PartitionsReleased'; data: Data<'PartitionsReleased'> }
  | { type: 'PartitionsTakenOver'; data: Data<'PartitionsTakenOver'> };

/** The share each of `live` executors may hold: ceil(P / N). */
export const fairShare = (partitionCount: number, live: number): number => Math.ceil(partitionCount / Math.max(1, live));

export function planLeases(s: LeaseSituation): LeaseCommand | undefined {
  const count = s.leases.context.partitionCount ?? s.partitionCount;
  const mine = partitionsOf(s.leases, s.me);
  if (s.draining) return mine.length > 0 ? { type: 'PartitionsReleased', data: { executorId: s.me, partitions: mine, reason: 'drain' } } : undefined;
  const fresh = new Map(s.beats.filter((b) => b.ageMs < s.staleAfterMs).map((b) => [b.executorId, b]));
  const live = new Set([...fresh.values()].filter((b) => !b.draining).map((b) => b.executorId)).add(s.me);
  const share = fairShare(count, live.size);
  if (mine.length > share) return { type: 'PartitionsReleased', data: { executorId: s.me, partitions: mine.slice(share), reason: 'rebalance' } };
  const want = share - mine.length;
  if (want === 0) return undefined;
  const owners = s.leases.context.owners;
  const free: number[] = [];
  for (let p = 0; p < count && free.length < want; p++) if (owners[p] === undefined) free.push(p);
  if (free.length > 0) return { type: 'PartitionsClaimed', data: { executorId: s.me, partitionCount: count, partitions: free } };
  // A holder with a fresh beat keeps its partitions even while draining: it releases them itself.
  const stale = new Map<string, number[]>();
  for (const [p, owner] of Object.entries(owners)) {
    if (owner === s.me || fresh.has(owner)) continue;
    stale.set(owner, [...(stale.get(owner) ?? []), Number(p)]);
  }
  const [from, theirs] = [...stale.entries()].sort(([a], [b]) => (a < b ? -1 : 1))[0] ?? [];
  if (from === undefined) return undefined;
  const beat = s.beats.find((b) => b.executorId === from);
  return { type: 'PartitionsTakenOver', data: { executorId: s.me, from, partitions: theirs!.slice(0, want), lastHeartbeatAt: beat ? beat.heartbeatAt.toISOString() : null } };
}
