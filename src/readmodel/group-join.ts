// Bringing projections that stand apart (a rebuilt one, or ones another projector moved alone)
// level with the projector's main group, so that they follow with it again. Without this, a
// projection once apart follows alone for good: nothing else ever puts it at the group's position.
//
// Why this is exact: the unit's members are moved as the group follower moves them (one
// transaction per batch, each checkpoint from the position it was read at, each member given
// its own events only), over the union of the unit's and the group's prefixes read in commit
// order. The group's position is an event of the group's prefixes (or START), delivered
// already, so if it lies ahead of the unit the read comes by it: the batch is cut right after it
// and the unit ends exactly there. If it lies behind, the read never meets it and the unit is
// only caught up (every event still applied once): the next attempt will find the group ahead.
// Positions are never compared; the group must not be following meanwhile (the host pauses it).
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/projection.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { applyGroupBatch, groupBatchSize, unionOfPrefixes } from './group-follow.ts';
import { logRefused, readBatches, type FollowHooks } from './projector.ts';

/** How many batches a join reads at most: it pauses the group meanwhile. */
export const JOIN_MAX_BATCHES = 4;

/**
 * Move `members` (all at checkpoint `from`) to exactly `target`, another group's checkpoint.
 * 'joined': they are at `target` now. 'apart': the target was not met (behind them, or further
 * than JOIN_MAX_BATCHES); they moved on consistently. 'moved': another writer moved a checkpoint.
 */
export async function joinGroupAt(o: {
  pool: pg.Pool;
  store: EventStore;
  members: readonly Projection[];
  from: bigint;
  target: bigint;
  targetMembers: readonly Projection[];
  log?: Logger;
  batchSize?: number;
  hooks?: FollowHooks;
}): Promise<'joined' | 'apart' | 'moved'> {
  if (o.target === 0n) return 'apart'; // START is behind everything
  const prefixes = unionOfPrefixes([...o.members, ...o.targetMembers]);
  let position = o.from;
  let batches = 0;
  for await (const batch of readBatches(o.store, { streamPrefixes: prefixes }, o.from, groupBatchSize(o.members, o.batchSize))) {
    const at = batch.findIndex((e) => e.globalPosition === o.target);
    const events = at >= 0 ? batch.slice(0, at + 1) : batch;
    const shares = await applyGroupBatch(o.pool, o.members, position, events);
    if (!shares) return 'moved';
    for (const s of shares) {
      logRefused(o.log, s.projection, s.result);
      o.hooks?.onBatch?.(s.projection, s.events, s.result);
    }
    position = events[events.length - 1]!.globalPosition;
    if (at >= 0) return 'joined';
    if (++batches >= JOIN_MAX_BATCHES) return 'apart';
  }
  return 'apart';
}
