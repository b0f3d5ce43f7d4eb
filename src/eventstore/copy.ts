// Copying one event store into another, through the EventStore port only, so any adapter pair
// works (Postgres → Postgres, Postgres ↔ EventStoreDB). `baton eventstore copy` drives it.
//
// What is preserved: every stream with its events' ids, types, data, metadata and revisions, and
// the global order in which the source's readAll delivers them: events are appended one run at a
// time in exactly that order (a run is consecutive events of one stream, appended together).
// What is not: `recordedAt` (the target stamps its own; `metadata.occurredAt` keeps the original
// time) and global position numbers (each store numbers its own).
//
// Why a resumed copy never duplicates: every append names the revision the source had before
// the run (`no_stream` for revision 0), so the target refuses an event whose place is already
// taken. A refused run (or one the target took as a replay of ids it knew) is then reconciled by
// reading that part of the target stream: the same events already there (ids and contents) are
// counted as already copied and skipped, the rest are appended; anything else at those revisions
// is a conflict and the copy stops, naming the stream. The checkpoint (the last source position copied) only saves rereading: losing it,
// or crashing between an append and the checkpoint's save, costs time, never correctness.
//
// Speed: one append (one commit) per run, strictly in order. Measured here (2 cores, Postgres 15,
// fsync on), Postgres → Postgres, 25,000 events of 5,000 interleaved six-event histories: 1,980
// events/s. Appending a whole batch in one Postgres transaction (appendWithin) made it 3,090/s:
// 1.5x, the statements' round trips rather than the commits being the cost, so not worth a second
// code path that only a Postgres target could use.
import { BatonError, DuplicateEventIdError, WrongExpectedRevisionError } from '../errors.ts';
import { START, type EventStore, type NewEvent, type StoredEvent } from './event-store.ts';
import { sameJson } from '../input/rules.ts';

/** The last event a copy wrote (or found already written), to check a checkpoint against the target. */
export interface CopiedEventRef {
  streamId: string;
  revision: bigint;
  eventId: string;
}

export interface CopyProgress {
  /** Events read from the source in this run. */
  read: number;
  appended: number;
  alreadyPresent: number;
  /** Source position of the last event read: where a resumed copy starts after. */
  position: bigint;
  lastEvent: CopiedEventRef;
}

export interface CopyOptions {
  source: EventStore;
  target: EventStore;
  /** Resume after this source position (a checkpoint). Default: the beginning. */
  after?: bigint;
  /**
   * With `after`: the last event the checkpointed copy wrote. Checked against the target before
   * anything is copied, so a checkpoint that belongs to another (or a wiped) target is refused
   * instead of silently skipping the events it says are there.
   */
  lastCopied?: CopiedEventRef;
  /** Events per readAll. Default 500. */
  batchSize?: number;
  /** Stop after reading this many events (the copy can be resumed from its checkpoint). */
  limit?: number;
  /** Called after every batch, once all of it is in the target: save the checkpoint here. */
  onBatch?: (p: CopyProgress) => void | Promise<void>;
  signal?: AbortSignal;
}

export interface CopyResult {
  read: number;
  appended: number;
  /** Events that were already in the target with the same id at the same revision. */
  alreadyPresent: number;
  /** Streams this run created in the target (their first event appended). */
  streamsCreated: number;
  /** Last source position read; equals `after` when nothing was read. */
  position: bigint;
  lastEvent: CopiedEventRef | undefined;
  /** True when the source had nothing more to read (false when `limit` or the signal stopped it). */
  complete: boolean;
  ms: number;
}

/** The target holds something else where the source's events belong. */
export class CopyConflictError extends BatonError {
  constructor(
    readonly streamId: string,
    readonly revision: bigint,
    detail: string,
  ) {
    super(`cannot copy ${streamId} at revision ${revision}: ${detail}`);
  }
}

/** A checkpoint says an event was copied, and the target does not have it. */
export class CheckpointMismatchError extends BatonError {}

const toNew = (e: StoredEvent): NewEvent => ({ eventId: e.eventId, type: e.type, data: e.data, metadata: e.metadata });
const refOf = (e: StoredEvent): CopiedEventRef => ({ streamId: e.streamId, revision: e.revision, eventId: e.eventId });

export async function copyEventStore(o: CopyOptions): Promise<CopyResult> {
  const started = performance.now();
  const batchSize = o.batchSize ?? 500;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new BatonError('copy: batchSize must be a positive integer');
  if (o.limit !== undefined && (!Number.isInteger(o.limit) || o.limit < 1)) throw new BatonError('copy: limit must be a positive integer');
  if (o.lastCopied) await checkResumePoint(o.target, o.lastCopied);
  await checkTargetIsFromSource(o.source, o.target);

  const totals = { read: 0, appended: 0, alreadyPresent: 0, streamsCreated: 0 };
  let position = o.after ?? START;
  let lastEvent = o.lastCopied;
  let complete = false;

  async function appendRun(run: StoredEvent[]): Promise<void> {
    const first = run[0]!;
    const streamId = first.streamId;
    try {
      const r = await o.target.append(streamId, run.map(toNew), { expectedRevision: first.revision === 0n ? 'no_stream' : first.revision - 1n });
      if (r.idempotentReplay) {
        // The target knew these event ids: it must hold these very events there, not others that
        // share an id (a keyed execution's first event has an id made from its key, in every store).
        totals.alreadyPresent += await alreadyCopied(o.target, run);
      } else {
        totals.appended += run.length;
        if (first.revision === 0n) totals.streamsCreated++;
      }
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError)) throw err;
      const present = await alreadyCopied(o.target, run, err);
      totals.alreadyPresent += present;
      if (present < run.length) await appendRun(run.slice(present));
    }
  }

  // "complete" means: everything committed before the copy started is in the target.
  await o.source.settled?.();
  while (!o.signal?.aborted) {
    const want = o.limit === undefined ? batchSize : Math.min(batchSize, o.limit - totals.read);
    if (want <= 0) break;
    const batch = await o.source.readAll({ after: position, limit: want });
    if (batch.length === 0) {
      complete = true;
      break;
    }
    // Runs of consecutive events of one stream with consecutive revisions: one append each.
    let run: StoredEvent[] = [];
    for (const e of batch) {
      const prev = run[run.length - 1];
      if (prev && (prev.streamId !== e.streamId || prev.revision + 1n !== e.revision)) {
        await appendRun(run);
        run = [];
      }
      run.push(e);
    }
    await appendRun(run);
    const last = batch[batch.length - 1]!;
    position = last.globalPosition;
    lastEvent = refOf(last);
    totals.read += batch.length;
    await o.onBatch?.({ read: totals.read, appended: totals.appended, alreadyPresent: totals.alreadyPresent, position, lastEvent });
  }
  return { ...totals, position, lastEvent, complete, ms: performance.now() - started };
}

/** The same event: id, type, data and metadata (as JSON: a store may give its keys in another order). */
const sameEvent = (a: StoredEvent, b: StoredEvent) => a.eventId === b.eventId && a.type === b.type && sameJson(a.data, b.data) && sameJson(a.metadata, b.metadata);

const ADVICE = 'copy into an empty event store, or into the one an earlier copy from this source wrote';

/** What the target holds where the source's event `ours` belongs. */
function conflictDetail(theirs: StoredEvent, ours: StoredEvent): string {
  return theirs.eventId === ours.eventId
    ? `the target already holds event ${theirs.eventId} there with other contents (${theirs.type} against the source's ${ours.type}${theirs.type === ours.type ? ', other data or metadata' : ''}): the same id made by another store (a keyed execution's or a workflow's first event)`
    : `the target already holds event ${theirs.eventId} (${theirs.type}) there, the source has ${ours.eventId} (${ours.type})`;
}

/** The target holds events that are not the source's: refused before anything is written. */
export class ForeignTargetError extends BatonError {}

/**
 * Before writing anything: a target that holds events must have them from this source (an earlier
 * or interrupted copy, which a resumed one finds). Checked on its first event, as every copy
 * writes the source's events in the source's order: a target of another installation (its own
 * `worker-…` streams) used to take thousands of events, then stop part-way on a collision. One
 * read on each side; a target that took this source's events first and others later still stops
 * at the first collision, naming it (alreadyCopied).
 */
async function checkTargetIsFromSource(source: EventStore, target: EventStore): Promise<void> {
  await target.settled?.();
  const [held] = await target.readAll({ after: START, limit: 1 });
  if (!held) return;
  const [ours] = await source.readStream(held.streamId, { fromRevision: held.revision, limit: 1 });
  if (ours && ours.revision === held.revision && sameEvent(ours, held)) return;
  if (ours && ours.revision === held.revision) throw new CopyConflictError(held.streamId, held.revision, `${conflictDetail(held, ours)}; ${ADVICE}`);
  throw new ForeignTargetError(
    `the target already holds events that are not from this source: its first, ${held.eventId} (${held.type}), is stream ${held.streamId} at revision ${held.revision}, ` +
      `which the source does not have; ${ADVICE}`,
  );
}

/**
 * After the target refused a run (`refusal`), or took it as a replay of event ids it knew (none):
 * how many of its leading events the target already holds, the same events at the same revisions.
 * Throws CopyConflictError when the target holds other events there (another id, or the same id
 * with other contents), or is behind (its stream lacks earlier events the source has); after a
 * replay, also when it holds fewer than the whole run.
 */
async function alreadyCopied(target: EventStore, run: StoredEvent[], refusal?: Error): Promise<number> {
  const first = run[0]!;
  const existing = await target.readStream(first.streamId, { fromRevision: first.revision, limit: run.length });
  let same = 0;
  while (same < existing.length && sameEvent(existing[same]!, run[same]!)) same++;
  if (same < existing.length) {
    const theirs = existing[same]!;
    throw new CopyConflictError(first.streamId, theirs.revision, `${conflictDetail(theirs, run[same]!)}; ${ADVICE}`);
  }
  if (!refusal && same < run.length) {
    throw new CopyConflictError(first.streamId, first.revision + BigInt(same), `the target knew these event ids, but holds only ${same} of these ${run.length} events at their revisions`);
  }
  if (refusal && same === 0) {
    const where = refusal instanceof WrongExpectedRevisionError ? `the target stream is at ${String(refusal.actual)}, expected ${String(refusal.expected)}` : refusal.message;
    throw new CopyConflictError(first.streamId, first.revision, `the target refused it (${where}), and holds nothing at that revision`);
  }
  return same;
}

async function checkResumePoint(target: EventStore, ref: CopiedEventRef): Promise<void> {
  const [e] = await target.readStream(ref.streamId, { fromRevision: ref.revision, limit: 1 });
  if (e?.eventId === ref.eventId && e.revision === ref.revision) return;
  throw new CheckpointMismatchError(
    `the checkpoint says event ${ref.eventId} (${ref.streamId} at revision ${ref.revision}) was copied, but the target ` +
      `${e ? `holds ${e.eventId} there` : 'does not have it'}; it belongs to another target, or the target was reset. ` +
      'Delete the checkpoint file (or pass another --checkpoint) to copy from the beginning: events already in the target are recognised by id and skipped',
  );
}
