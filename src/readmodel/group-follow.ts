// Following the store once for several projections whose checkpoints stand at the same position:
// one subscription over the union of their stream prefixes, and per batch ONE transaction that
// moves every member's checkpoint to the batch's last event, applies each member's share of
// the batch, and sends one change notification. Per-projection followers rescanned and
// re-parsed the same events four times and paid BEGIN, checkpoint UPDATE, NOTIFY and COMMIT
// four times per batch (~45% of all CPU per execution in `baton bench`). The members then
// stay at one position for ever, since only this moves them (or another writer: 'moved').
//
// A member's checkpoint may so be the position of an event of another member's prefixes:
// resuming reads `after` any stored position, and the lag (projector-host.ts, `baton
// projections status`) reads the next event of the member's own prefixes after it.
import type pg from 'pg';
import type { Logger } from 'pino';
import { projections as allProjections } from '../../projections/index.ts';
import { eventsOf, type BatchMemory, type BatchResult, type EventSource, type Projection } from '../../projections/projection.ts';
import { channelOf, readModelSchemaOf } from '../db/db-schema.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { availableBatches } from './batches.ts';
import { BatonError } from '../errors.ts';
import { NewerVersionError, advanceCheckpoint, readCheckpoint, type Checkpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { CATCH_UP_BATCH_SIZE, MIN_READ_INTERVAL_MS, SETTLE_MS, logRefused, notifyChanged, readBatches, type FollowHooks } from './projector.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from './notifications.ts';
import { inTransaction } from './tables.ts';
import { alignStoreViews } from './store-views.ts';
import { rebuildProjection } from './rebuild.ts';

/** Every stream prefix of the members, each once. */
export const unionOfPrefixes = (members: readonly Projection[]): string[] => [...new Set(members.flatMap((p) => p.streamPrefixes))];

/**
 * Most events in one batch of a group: CATCH_UP_BATCH_SIZE, or `batchSize` for each member when
 * the caller sets one (tests). A live batch is smaller by itself (what arrived since the last read,
 * at most MIN_READ_INTERVAL_MS apart); the limit counts when the group is behind. The members'
 * applies run one after another in one transaction: at 500 events a batch, the group fell behind
 * under load (`baton bench`, 10,000 executions, 50 at once: executions lag p50 2,300–2,500 ms); at
 * 500 per member (2,000) p50 330–360 ms; at 5,000, 20,000 executions taken together with 2,000
 * twice: lag p99 369 / 506 ms against 418 / 556, and a projector that was behind catches up
 * faster (see CATCH_UP_BATCH_SIZE).
 */
export const batchLimit = (members: readonly Projection[], batchSize: number | undefined): number =>
  batchSize === undefined ? CATCH_UP_BATCH_SIZE : batchSize * members.length;

export interface MemberResult {
  projection: Projection;
  events: StoredEvent[];
  result: BatchResult;
}

const NOTHING: BatchResult = { changedExecutions: [], refused: [] };

/** One member's apply failed (the whole batch rolled back): the projector follows that member apart. */
export class ProjectionApplyError extends Error {
  constructor(
    readonly projection: string,
    cause: unknown,
  ) {
    super(`projection ${projection}: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'ProjectionApplyError';
  }
}

/**
 * The members' BatchMemory (projections/projection.ts) for one follow or catch-up: made with it,
 * and so dropped with it. Each ends on a failed batch (thrown) or a moved checkpoint (returned),
 * so a memory never outlives a batch that did not commit or a write by anyone else.
 */
export class Memories {
  readonly #byName = new Map<string, BatchMemory>();
  of(p: Projection): BatchMemory {
    let memory = this.#byName.get(p.name);
    if (!memory) this.#byName.set(p.name, (memory = new Map()));
    return memory;
  }
}

/** Members in name order: every mover of several checkpoints takes their row locks in this order. */
export const byName = (members: readonly Projection[]): Projection[] => [...members].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

/**
 * Apply a batch for every member and move each one's checkpoint from `expected` to the batch's
 * last event, in one transaction. Returns null, having written nothing, when any member's
 * checkpoint was no longer at `expected`.
 */
export async function applyGroupBatch(
  pool: pg.Pool,
  members: readonly Projection[],
  expected: bigint,
  events: readonly StoredEvent[],
  source?: EventSource,
  memories?: Memories,
): Promise<MemberResult[] | null> {
  const last = events[events.length - 1]!;
  // Checkpoints in name order, all before any row: two movers of overlapping sets take the row
  // locks in one order (no deadlock), and a rebuild's swap, which locks one checkpoint and then
  // replaces its tables, never waits on tables we hold while we wait on its checkpoint.
  const ordered = byName(members);
  const moved = new Error('a checkpoint moved');
  // Not durable at COMMIT: the rows and the checkpoint are derived from events already stored
  // durably, and they commit together, so a crash can only take back whole batches, which the
  // projector then applies again from the checkpoint that survived. A durable commit here
  // waited for its own WAL flush, and at light load that flush fell on the pickup path: the
  // projector's commit of a submit raced the executor's handoff commit for the disk. Measured
  // in `baton bench` (1,000 submits one at a time, four runs each, alternated): pickup p95 / p99
  // 5.0–5.3 / 7.8–8.4 ms durable, 4.3–5.1 / 7.5–8.1 ms not (lower in every pair for p95, three of
  // four for p99; p50 1.7–2.0 ms either way); throughput unchanged.
  return inTransaction(pool, async (client) => {
    const shares = ordered.map((p) => ({ projection: p, events: eventsOf(p, events), result: NOTHING }));
    for (const s of shares) {
      const mine = s.events[s.events.length - 1];
      const next = { position: last.globalPosition, events: s.events.length, lastRecordedAt: mine?.recordedAt ?? null };
      // Thrown to roll back the members already moved.
      if (!(await advanceCheckpoint(client, s.projection, expected, next))) throw moved;
    }
    const schema = readModelSchemaOf(pool);
    for (const s of shares) {
      if (s.events.length === 0) continue;
      try {
        s.result = await s.projection.apply(client, schema, s.events, source, memories?.of(s.projection));
      } catch (err) {
        throw new ProjectionApplyError(s.projection.name, err);
      }
    }
    // One NOTIFY (per 200 ids) for the whole batch, sent at COMMIT like the rows.
    await notifyChanged(client, channelOf(pool, EXECUTIONS_CHANGED_CHANNEL), [...new Set(shares.flatMap((s) => s.result.changedExecutions))]);
    return shares as MemberResult[] | null;
  }, { durable: false }).catch((err: unknown) => {
    if (err === moved) return null;
    throw err;
  });
}

/**
 * Follow the store for a group of projections, all at checkpoint `from`, until `signal`
 * aborts. Returns 'moved' when another writer moved any member's checkpoint (the caller re-reads
 * the checkpoints and groups again). Hooks see each member's share of each batch (possibly none).
 */
export async function followGroup(o: {
  pool: pg.Pool;
  store: EventStore;
  projections: readonly Projection[];
  from: bigint;
  signal: AbortSignal;
  log?: Logger;
  batchSize?: number;
  hooks?: FollowHooks;
  /** See MIN_READ_INTERVAL_MS. */
  minReadIntervalMs?: number;
  /** See SETTLE_MS. */
  settleMs?: number;
}): Promise<'stopped' | 'moved'> {
  // An aborted signal fires no more abort events: one aborted already (the round ended while the
  // caller re-read checkpoints) would leave the subscription open and this following for good.
  if (o.signal.aborted) return 'stopped';
  const inner = new AbortController();
  const stop = () => inner.abort();
  o.signal.addEventListener('abort', stop, { once: true });
  let position = o.from;
  const batchSize = batchLimit(o.projections, o.batchSize);
  try {
    const events = o.store.subscribe({
      after: o.from,
      streamPrefixes: unionOfPrefixes(o.projections),
      signal: inner.signal,
      batchSize,
      minReadIntervalMs: o.minReadIntervalMs ?? MIN_READ_INTERVAL_MS,
      settleMs: o.settleMs ?? SETTLE_MS,
    });
    const source = eventSourceOf(o.store, o.pool);
    const memories = new Memories();
    for await (const batch of availableBatches(events, batchSize)) {
      // On a failure too, end the subscription before the loop's cleanup, which waits for its
      // pending read: at a quiet moment that read waits for the next event, and the failure with it
      // (a projection that could not apply its batch went unreported and unretried until then).
      const shares = await applyGroupBatch(o.pool, o.projections, position, batch, source, memories).catch((err: unknown) => {
        inner.abort();
        throw err;
      });
      if (!shares) {
        inner.abort(); // before the loop's cleanup, which waits for the subscription's pending read
        return 'moved';
      }
      position = batch[batch.length - 1]!.globalPosition;
      for (const s of shares) {
        logRefused(o.log, s.projection, s.result);
        o.hooks?.onBatch?.(s.projection, s.events, s.result);
      }
      if (o.signal.aborted) break;
    }
    return 'stopped';
  } finally {
    o.signal.removeEventListener('abort', stop);
    inner.abort();
  }
}

/** Bring a group, all at checkpoint `from`, up to the current end of the store: the events applied, and whether a checkpoint moved under us (then it stopped there). */
async function catchUpGroup(o: { pool: pg.Pool; store: EventStore; projections: readonly Projection[]; from: bigint; log?: Logger; batchSize?: number }): Promise<{ applied: number; moved: boolean }> {
  let position = o.from;
  let applied = 0;
  const memories = new Memories();
  for await (const events of readBatches(o.store, { streamPrefixes: unionOfPrefixes(o.projections) }, position, batchLimit(o.projections, o.batchSize))) {
    const shares = await applyGroupBatch(o.pool, o.projections, position, events, eventSourceOf(o.store, o.pool), memories);
    if (!shares) return { applied, moved: true };
    for (const s of shares) logRefused(o.log, s.projection, s.result);
    applied += events.length;
    position = events[events.length - 1]!.globalPosition;
  }
  return { applied, moved: false };
}

/** Bring one projection's live tables up to the current end of the store (as a group of one); the events it applied. */
export async function catchUpProjection(o: { pool: pg.Pool; store: EventStore; projection: Projection; log?: Logger; batchSize?: number }): Promise<number> {
  let applied = 0;
  for (let restarts = 0; restarts < 100; restarts++) {
    const { position, version } = await readCheckpoint(o.pool, o.projection.name);
    // Another version's tables (the checkpoint's compare-and-swap would refuse every batch).
    if (version > o.projection.version) throw new NewerVersionError(o.projection.name, version, o.projection.version);
    if (version !== o.projection.version) throw new BatonError(`projection ${o.projection.name}: its tables were built by version ${version}, this code is version ${o.projection.version}: run \`baton projections rebuild ${o.projection.name}\``);
    const r = await catchUpGroup({ ...o, projections: [o.projection], from: position });
    applied += r.applied;
    if (!r.moved) return applied; // else someone else moved it: start again from where they left it
  }
  throw new Error(`projection ${o.projection.name}: checkpoint kept moving under us; is another projector running flat out?`);
}

/**
 * Bring every projection's live tables up to the current end of the store (tests, benches),
 * projections at one position as one group, so they stay together for the projector.
 */
export async function catchUpReadModel(o: { pool: pg.Pool; store: EventStore; log?: Logger; projections?: readonly Projection[]; batchSize?: number }): Promise<void> {
  const list = o.projections ?? allProjections;
  // In the form the projector keeps them (a timeline of events in this database is a view of them).
  // And at this code's version, as the projector does (rebuildProjection refuses to go down a version).
  const toTable = await alignStoreViews(o.pool, list, eventSourceOf(o.store, o.pool), o.log);
  const versions = await Promise.all(list.map((p) => readCheckpoint(o.pool, p.name)));
  for (const p of list.filter((p, i) => toTable.has(p) || versions[i]!.version !== p.version)) await rebuildProjection({ ...o, projection: p });
  for (let restarts = 0; restarts < 100; restarts++) {
    const checkpoints = await Promise.all(list.map((p) => readCheckpoint(o.pool, p.name)));
    let moved = false;
    for (const g of groupByPosition(list, checkpoints)) {
      if ((await catchUpGroup({ ...o, projections: g.members, from: g.position })).moved) moved = true;
    }
    if (!moved) return;
  }
  throw new Error('catching up the read model: checkpoints kept moving under us; is another projector running flat out?');
}

/** Projections whose checkpoints stand at the same position, in `list`'s order. */
export function groupByPosition(list: readonly Projection[], checkpoints: readonly Checkpoint[]): { members: Projection[]; position: bigint }[] {
  const groups = new Map<bigint, Projection[]>();
  list.forEach((p, i) => {
    const at = checkpoints[i]!.position;
    groups.set(at, [...(groups.get(at) ?? []), p]);
  });
  return [...groups].map(([position, members]) => ({ position, members }));
}
