// The partition lease machine: which executor decides each partition, as the stream
// `partition-leases` records it. Pure like the other machines: no I/O, no clock. Whether a
// holder is stale is the caller's judgement (the liveness table); the machine only checks that
// a takeover names the partitions' actual holder, so two executors that both judged the same
// holder stale cannot both take its partitions (the second decides again on the first's event).
//
//   Leasing ──PartitionsClaimed (each free)─────────────▶ Leasing
//           ──PartitionsReleased (each held by the sender)─▶ Leasing
//           ──PartitionsTakenOver (each held by `from`)────▶ Leasing
import { assign, setup, type SnapshotFrom } from 'xstate';
import { foldWith } from './fold.ts';
import { stepperOf } from './stepper.ts';
import type { PartitionEvent } from '../schemas/partition-events.ts';

export const PARTITION_LEASE_MACHINE_VERSION = '1';

export interface PartitionLeaseContext {
  /** Fixed by the first claim; null for an empty stream. */
  partitionCount: number | null;
  /** Partition → the executor holding it; absent: free. */
  owners: Record<number, string>;
  /** occurredAt of the last accepted event. */
  updatedAt: string | null;
}

/** Why the machine refuses `event`, or null when it takes it: the one place the rules are written. */
export function leaseRefusal(context: PartitionLeaseContext, event: PartitionEvent): string | null {
  const { partitionCount, owners } = context;
  const count = event.type === 'PartitionsClaimed' ? (partitionCount ?? event.data.partitionCount) : partitionCount;
  if (count === null) return `no partition is claimed yet: ${event.type} has nothing to act on`;
  if (event.type === 'PartitionsClaimed' && event.data.partitionCount !== count) {
    return `this installation has ${count} partitions, not ${event.data.partitionCount}`;
  }
  if (new Set(event.data.partitions).size !== event.data.partitions.length) return 'a partition is named twice';
  const holder = event.type === 'PartitionsClaimed' ? undefined : event.type === 'PartitionsReleased' ? event.data.executorId : event.data.from;
  if (event.type === 'PartitionsTakenOver' && event.data.from === event.data.executorId) return 'an executor cannot take over its own partitions';
  for (const p of event.data.partitions) {
    if (p >= count) return `partition ${p} does not exist (there are ${count})`;
    if (owners[p] !== holder) return `partition ${p} is ${owners[p] === undefined ? 'free' : `held by ${owners[p]}`}${holder === undefined ? '' : `, not by ${holder}`}`;
  }
  return null;
}

export const partitionLeaseMachine = setup({
  types: { context: {} as PartitionLeaseContext, events: {} as PartitionEvent },
  guards: { allowed: ({ context, event }) => leaseRefusal(context, event) === null },
  actions: {
    apply: assign(({ context, event }) => {
      const owners = { ...context.owners };
      for (const p of event.data.partitions) {
        if (event.type === 'PartitionsReleased') delete owners[p];
        else owners[p] = event.data.executorId;
      }
      const partitionCount = context.partitionCount ?? (event.type === 'PartitionsClaimed' ? event.data.partitionCount : null);
      return { owners, partitionCount, updatedAt: event.metadata.occurredAt };
    }),
  },
}).createMachine({
  id: 'partition-leases',
  initial: 'Leasing',
  context: { partitionCount: null, owners: {}, updatedAt: null },
  states: {
    Leasing: {
      on: {
        PartitionsClaimed: { guard: 'allowed', actions: 'apply' },
        PartitionsReleased: { guard: 'allowed', actions: 'apply' },
        PartitionsTakenOver: { guard: 'allowed', actions: 'apply' },
      },
    },
  },
});

export type PartitionLeaseSnapshot = SnapshotFrom<typeof partitionLeaseMachine>;

const step = stepperOf(partitionLeaseMachine, undefined);

/** The leases before any event: nothing claimed. */
export const startPartitionLeases = (): PartitionLeaseSnapshot => step.initial(undefined);

export type LeaseDecision = { ok: true; snapshot: PartitionLeaseSnapshot } | { ok: false; reason: string };

export function decidePartitionLease(snapshot: PartitionLeaseSnapshot, event: PartitionEvent): LeaseDecision {
  if (snapshot.can(event)) return { ok: true, snapshot: step.next(snapshot, event) };
  return { ok: false, reason: leaseRefusal(snapshot.context, event) ?? `${event.type} refused` };
}

/** The stored history folded; throws on an event the machine refuses (corruption). */
export function foldPartitionLeases(events: readonly PartitionEvent[]): PartitionLeaseSnapshot {
  return foldWith(step, startPartitionLeases(), events, (s, e) => leaseRefusal(s.context, e) ?? 'the machine did not take it');
}

/** The partitions `executorId` holds, ascending. */
export function partitionsOf(snapshot: PartitionLeaseSnapshot, executorId: string): number[] {
  return Object.entries(snapshot.context.owners)
    .filter(([, owner]) => owner === executorId)
    .map(([p]) => Number(p))
    .sort((a, b) => a - b);
}
