// The partition leases as the actor runtime sees them: the one stream `partition-leases`, the
// lease machine's decisions, and its refusals as PartitionLeaseRefusedError.
import { PARTITION_LEASE_MACHINE_VERSION, decidePartitionLease, foldPartitionLeases, startPartitionLeases, type PartitionLeaseSnapshot } from '../../../actors/partition-lease.machine.ts';
import { PARTITION_LEASES_STREAM, PartitionEvent } from '../../../schemas/partition-events.ts';
import { BatonError, parseOrThrow } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import type { ActorKind } from '../../runtime/actor-kind.ts';
import { createActorRuntime, type ActorRuntime } from '../../runtime/actor-runtime.ts';

/** The id the runtime knows the one lease stream by. */
export const LEASES = 'leases';

export class PartitionLeaseRefusedError extends BatonError {}

export const partitionLeaseKind: ActorKind<PartitionLeaseSnapshot, PartitionEvent> = {
  name: 'partition-leases',
  machineVersion: PARTITION_LEASE_MACHINE_VERSION,
  streamPrefix: PARTITION_LEASES_STREAM,
  streamId: () => PARTITION_LEASES_STREAM,
  idOf: (streamId) => (streamId === PARTITION_LEASES_STREAM ? LEASES : undefined),
  empty: () => startPartitionLeases(),
  read: (e) => parseOrThrow(PartitionEvent, { type: e.type, data: e.data, metadata: e.metadata }, `stored ${e.type} event`),
  make: (c, occurredAt) => parseOrThrow(PartitionEvent, { type: c.type, data: c.data, metadata: { by: c.by, occurredAt, machineVersion: PARTITION_LEASE_MACHINE_VERSION } }, `${c.type} event`),
  decide(_id, before, event) {
    const d = decidePartitionLease(before ?? startPartitionLeases(), event);
    return d.ok ? d : { ok: false, error: new PartitionLeaseRefusedError(`partition leases: ${event.type} refused: ${d.reason}`) };
  },
  fold: (_id, events) => foldPartitionLeases(events),
  isFinal: () => false,
};

export type PartitionLeaseRuntime = ActorRuntime<PartitionLeaseSnapshot, PartitionEvent>;
export const createPartitionLeaseRuntime = (store: EventStore): PartitionLeaseRuntime => createActorRuntime(store, partitionLeaseKind);
