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
// First, though, the short way (stepOver below), which needs no reading of others' events.
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Projection } from '../../projections/projection.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { advanceCheckpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { applyGroupBatch, batchLimit, byName, unionOfPrefixes } from './group-follow.ts';
import { inTransaction } from './tables.ts';
import { DEFAULT_BATCH_SIZE, logRefused, readBatches, type FollowHooks } from './projector.ts';

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
  const step = await stepOver(o);
  if (step !== 'apart') return step;
  const prefixes = unionOfPrefixes([...o.members, ...o.targetMembers]);
  let position = o.from;
  let batches = 0;
  // Live-sized batches, not a catch-up's: the group waits while a join reads (JOIN_MAX_BATCHES of them).
  for await (const batch of readBatches(o.store, { streamPrefixes: prefixes }, o.from, batchLimit(o.members, o.batchSize ?? DEFAULT_BATCH_SIZE))) {
    const at = batch.findIndex((e) => e.globalPosition === o.target);
    const events = at >= 0 ? batch.slice(0, at + 1) : batch;
    const shares = await applyGroupBatch(o.pool, o.members, position, events, eventSourceOf(o.store, o.pool));
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

/**
 * The short way, for members with none of their events between their checkpoint and the
 * target (a projection whose streams are quiet, such as schedules, or one caught up to its own
 * last event): move the checkpoints straight to the target. When nothing of the members' follows
 * their checkpoint (read 1) nor the target (read 2), no event of theirs lies between the two,
 * whichever comes first: one before the target would be deliverable (it commits before an event
 * already delivered) and read 1 would return it; one after the target but at or before the
 * checkpoint was delivered to them already, so read 2 would return it. Events committed later
 * all come after the target, where the members then follow from.
 */
async function stepOver(o: { pool: pg.Pool; store: EventStore; members: readonly Projection[]; from: bigint; target: bigint }): Promise<'joined' | 'apart' | 'moved'> {
  const streamPrefixes = unionOfPrefixes(o.members);
  const [afterCheckpoint] = await o.store.readAll({ after: o.from, limit: 1, streamPrefixes });
  if (afterCheckpoint) return 'apart';
  const [afterTarget] = await o.store.readAll({ after: o.target, limit: 1, streamPrefixes });
  if (afterTarget) return 'apart';
  const moved = await inTransaction(o.pool, async (client) => {
    for (const p of byName(o.members)) {
      if (!(await advanceCheckpoint(client, p, o.from, { position: o.target, events: 0, lastRecordedAt: null }))) throw MOVED;
    }
  }).then(
    () => false,
    (err: unknown) => {
      if (err === MOVED) return true;
      throw err;
    },
  );
  return moved ? 'moved' : 'joined';
}

const MOVED = new Error('a checkpoint moved');
