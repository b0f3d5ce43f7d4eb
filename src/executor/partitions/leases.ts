// This executor's partition leases: it beats in the executor liveness table, and on every beat
// asks the lease planner (lease-plan.ts) what to append to the lease stream (claim, release,
// take over), through the lease machine at the stream's expected revision. The executor's
// scheduling pass asks owns(bucket) and decides only the concurrency buckets of partitions it
// holds, so each bucket (and each execution) has one deciding executor at a time.
//
// Moving a partition without two deciders at once:
//   - release (rebalance, drain): owns() says no first, the pass in flight finishes (quiesce),
//     and only then is the release appended;
//   - claim or takeover: a partition acquired after the first beat is decided only `settleMs`
//     later, so this process's follower has delivered the previous owner's last handoffs;
//   - a process that could not beat for staleAfterMs − beatEveryMs decides nothing (self-fence),
//     well before another takes its partitions over at staleAfterMs.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { partitionsOf } from '../../../actors/partition-lease.machine.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { HOST_IDENTITY, type ExecutorBeats } from './executor-beats.ts';
import { LEASES, createPartitionLeaseRuntime } from './lease-kind.ts';
import { partitionOf, planLeases, type LeaseCommand } from './lease-plan.ts';

export const DEFAULT_PARTITIONS = 16;

export interface PartitionLeases {
  readonly executorId: string;
  /** Whether this executor decides the bucket's executions now. */
  owns(bucket: string): boolean;
  /** The partitions held (settled or not), ascending. */
  held(): number[];
  /** The executor: kicked when partitions become decidable; quiesced (its pass in flight ends) before a release. */
  attach(executor: { kick(): void; quiesce(): Promise<void> }): () => void;
  /** Resolves after the first beat and claim. */
  ready: Promise<void>;
  /** Release every partition (drain) and remove the liveness row. */
  stop(): Promise<void>;
}

export interface PartitionLeaseOptions {
  store: EventStore;
  beats: ExecutorBeats;
  log: Logger;
  executorId?: string;
  /** BATON_PARTITIONS: the count fixed by the installation's first claim. */
  partitionCount?: number;
  /** An executor whose beat is older than this is dead: its partitions are taken over. */
  staleAfterMs?: number;
  beatEveryMs?: number;
  settleMs?: number;
  now?: () => number;
}

export const newExecutorId = (): string => `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;

export function startPartitionLeases(o: PartitionLeaseOptions): PartitionLeases {
  const executorId = o.executorId ?? newExecutorId();
  const now = o.now ?? Date.now;
  const staleAfterMs = o.staleAfterMs ?? 30_000;
  const beatEveryMs = o.beatEveryMs ?? Math.max(100, Math.floor(staleAfterMs / 3));
  const settleMs = o.settleMs ?? 1_000;
  const runtime = createPartitionLeaseRuntime(o.store);
  const log = o.log.child({ executorId });
  /** Partition → from when this executor may decide it. */
  const held = new Map<number, number>();
  const releasing = new Set<number>();
  let count = o.partitionCount ?? DEFAULT_PARTITIONS;
  let lastBeat = -Infinity;
  let draining = false;
  let first = true;
  let executor: { kick(): void; quiesce(): Promise<void> } | undefined;
  const timers = new Set<NodeJS.Timeout>();

  function kickAt(at: number): void {
    const t = setTimeout(() => {
      timers.delete(t);
      executor?.kick();
    }, Math.max(0, at - now()));
    t.unref();
    timers.add(t);
  }

  async function apply(command: LeaseCommand | undefined): Promise<void> {
    if (command === undefined) return;
    const r = await runtime.dispatch(LEASES, (snapshot) => {
      const again = planLeases(situation(snapshot!));
      return again && { ...again, by: 'executor' as const };
    });
    const s = r.snapshot;
    count = s.context.partitionCount ?? count;
    const mine = new Set(partitionsOf(s, executorId));
    for (const p of [...held.keys()]) if (!mine.has(p)) held.delete(p);
    const from = first ? now() : now() + settleMs;
    let gained = 0;
    for (const p of mine) if (!held.has(p)) (held.set(p, from), gained++);
    // `partitions`: how many the event names (taken or released); `held`: how many this executor holds after it.
    if (r.appended) log.info({ event: command.type, partitions: command.data.partitions.length, held: mine.size }, `partition leases: ${command.type}`);
    if (gained > 0) kickAt(from);
  }

  let beats: Awaited<ReturnType<ExecutorBeats['list']>> = [];
  const situation = (leases: Parameters<typeof planLeases>[0]['leases']) => ({ me: executorId, leases, partitionCount: count, beats, staleAfterMs, draining });

  async function tick(): Promise<void> {
    await o.beats.beat({ executorId, draining, pid: process.pid, host: HOST_IDENTITY });
    lastBeat = now();
    beats = await o.beats.list();
    const { snapshot } = await runtime.load(LEASES, { fresh: true });
    const planned = planLeases(situation(snapshot));
    if (planned?.type === 'PartitionsReleased') {
      // Stop deciding them, and let the pass that may be deciding them now end, before the release.
      for (const p of planned.data.partitions) releasing.add(p);
      await executor?.quiesce();
    }
    try {
      await apply(planned);
    } finally {
      releasing.clear();
    }
    first = false;
  }

  let ticking: Promise<void> | undefined;
  const runTick = () => {
    if (ticking) return ticking;
    ticking = tick()
      .catch((err: unknown) => log.warn({ err }, 'partition leases: beat failed; retrying next beat'))
      .finally(() => (ticking = undefined));
    return ticking;
  };
  const ready = runTick();
  const timer = setInterval(() => void runTick(), beatEveryMs);
  timer.unref();

  return {
    executorId,
    owns(bucket) {
      if (now() - lastBeat > staleAfterMs - beatEveryMs) return false; // self-fence: others may take over soon
      const p = partitionOf(bucket, count);
      const from = held.get(p);
      return from !== undefined && from <= now() && !releasing.has(p);
    },
    held: () => [...held.keys()].sort((a, b) => a - b),
    attach(e) {
      executor = e;
      return () => {
        if (executor === e) executor = undefined;
      };
    },
    ready,
    async stop() {
      clearInterval(timer);
      for (const t of timers) clearTimeout(t);
      await ticking;
      draining = true;
      try {
        await tick();
        await o.beats.remove(executorId);
      } catch (err) {
        log.warn({ err }, 'partition leases: could not release on stop; others take over after the staleness limit');
      }
      held.clear();
    },
  };
}
