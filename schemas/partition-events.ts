// The partition lease catalog: which executor decides which partition, one stream
// (`partition-leases`) for the whole installation, so every change of ownership is fenced by
// one expected revision. History only: claims, releases and takeovers. An executor's heartbeat
// is liveness, not history (src/liveness/, table baton_executor_liveness).
import { z } from 'zod';
import { dateTime, text } from '../src/input/schemas.ts';
import { EventMetadata, ExecutorRef } from './events.ts';

export const PARTITION_LEASES_STREAM = 'partition-leases';
/** The most partitions an installation may have: a bound on the lease snapshot. */
export const MAX_PARTITIONS = 4096;

const event = <T extends string, D extends z.ZodType>(type: T, data: D) =>
  z.object({ type: z.literal(type), data, metadata: EventMetadata.extend({ by: ExecutorRef }) });

/** One executor process: host, pid and a random suffix (src/executor/partitions/executor-id.ts). */
export const ExecutorId = text().min(1).max(200);
const Partitions = z.array(z.number().int().min(0).max(MAX_PARTITIONS - 1)).min(1).max(MAX_PARTITIONS);

/** Free partitions taken by `executorId`. The first claim fixes the installation's partition count. */
export const PartitionsClaimed = event('PartitionsClaimed', z.object({ executorId: ExecutorId, partitionCount: z.number().int().min(1).max(MAX_PARTITIONS), partitions: Partitions }));
/** Partitions `executorId` gives up: it is stopping, or holds more than its fair share. */
export const PartitionsReleased = event('PartitionsReleased', z.object({ executorId: ExecutorId, partitions: Partitions, reason: z.enum(['drain', 'rebalance']) }));
/** Partitions of `from`, whose heartbeat went stale, taken by `executorId`. */
export const PartitionsTakenOver = event('PartitionsTakenOver', z.object({ executorId: ExecutorId, from: ExecutorId, partitions: Partitions, lastHeartbeatAt: dateTime().nullable() }));

export const PartitionEvent = z.discriminatedUnion('type', [PartitionsClaimed, PartitionsReleased, PartitionsTakenOver]);
export type PartitionEvent = z.infer<typeof PartitionEvent>;
