// Retention: finished executions (and finished workflows with all their steps) older than the
// limit are written to an archive in the portable history format, then removed from the event
// store and the read model. Never one in flight: the read model only proposes candidates; each
// is checked against its own stream (final through the machine, its last event recorded before
// the cutoff, every projection past it) and removed at the revision it was checked at, so an
// append that raced the check makes the removal conflict and the candidate is skipped.
//
// Each execution (a workflow with its steps) is removed atomically and retry-safe (a page of
// executions goes in one transaction; one that moved on makes it retry them one by one):
//   1. its archive file is written and fsynced (archive-file.ts); a crash before the next step
//      leaves a file that the next run writes again, same name and content;
//   2. Postgres store: one transaction records the stream as archived, deletes the streams
//      (deleteStreamWithin) and takes the rows out of the read model (read-model.ts);
//      EventStoreDB: the transaction records it with pending_delete and takes the rows out, then
//      the stream is deleted in EventStoreDB and the flag cleared; a crash in between leaves the
//      flag, and the next run deletes the stream first thing.
import type pg from 'pg';
import type { Logger } from 'pino';
import { isFinal } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { BatonError, WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import type { PostgresEventStore } from '../eventstore/postgres.ts';
import { mapLimit } from '../async/map-limit.ts';
import { inTransaction } from '../readmodel/tables.ts';
import { executionKind } from '../runtime/execution-kind.ts';
import { workflowKind } from '../runtime/workflow-kind.ts';
import { archivePathFor, archiveUnwritable, executionArchivePath, executionHistoryDocument, workflowArchivePath, workflowHistoryDocument, writeDurably } from './archive-file.ts';
import { removeFromReadModel } from './read-model.ts';
import { holdSession } from '../db/held-session.ts';
import {
  countCandidates,
  deleteDone,
  executionCandidates,
  pendingDeletes,
  projectionsBehind,
  recordArchived,
  workflowCandidates,
  workflowExecutionIds,
  type ExecutionCandidate,
} from './store-side.ts';

export interface RetentionOptions {
  pool: pg.Pool;
  store: EventStore;
  olderThanMs: number;
  /** Where archive files go (created if missing). */
  archiveDir: string;
  /** Count what would be archived; change nothing. */
  dryRun?: boolean;
  now?: () => Date;
  /** Candidates read from the read model at a time. */
  batchSize?: number;
  log?: Logger;
  signal?: AbortSignal;
  /** After each execution or workflow considered: how many so far, of about how many. */
  onProgress?: (done: number, total: number) => void;
}

export interface Skipped {
  id: string;
  reason: string;
}

export interface RetentionSummary {
  cutoff: string;
  dryRun: boolean;
  archiveDir: string;
  /** Executions archived (or, dry run, that would be), workflows' steps included. */
  executions: number;
  workflows: number;
  /** Events removed from the store (dry run: that would be). */
  events: number;
  skipped: Skipped[];
  ms: number;
}

/** What goes together: one execution, or a workflow and all its steps. */
interface Unit {
  steps: Checked[];
  workflow?: Checked;
}

/** What a candidate is, checked against its own stream. */
interface Checked {
  id: string;
  streamId: string;
  events: StoredEvent[];
  /** Its archive file: the usual name until remove() finds it holds another history (archivePathFor). */
  archive: string;
}

/** Another run holds the retention lock (an executor's BATON_RETENTION, or another `baton retention run`). */
export class RetentionBusyError extends BatonError {
  constructor() {
    super('another retention run is in progress on this store (an executor with BATON_RETENTION, or another `baton retention run`); try again once it has finished');
  }
}

const LOCK = "hashtextextended('baton_retention', 0)";

/**
 * Archive and remove what finished before the cutoff. One run at a time per store: a session
 * advisory lock, held for the whole run (a dry run changes nothing and takes none). Two runs at
 * once both took the same executions out of the read model, and its counters went below zero.
 */
export async function runRetention(o: RetentionOptions): Promise<RetentionSummary> {
  if (o.dryRun) return retentionRun(o);
  const client = await holdSession(o.pool);
  try {
    const r = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${LOCK}) AS locked`);
    if (!r.rows[0]!.locked) throw new RetentionBusyError();
    try {
      return await retentionRun(o);
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${LOCK})`);
    }
  } finally {
    client.release();
  }
}

/** A stream already removed by the time this run removes it: the unit is skipped, as one that moved on. */
class RemovedMeanwhile extends BatonError {}

async function retentionRun(o: RetentionOptions): Promise<RetentionSummary> {
  const started = performance.now();
  const now = o.now?.() ?? new Date();
  const cutoff = new Date(now.getTime() - o.olderThanMs);
  const batchSize = o.batchSize ?? 100;
  const postgres = 'deleteStreamWithin' in o.store ? (o.store as PostgresEventStore) : undefined;
  const summary: RetentionSummary = { cutoff: cutoff.toISOString(), dryRun: o.dryRun === true, archiveDir: o.archiveDir, executions: 0, workflows: 0, events: 0, skipped: [], ms: 0 };
  if (!o.dryRun && !postgres) await finishPendingDeletes(o);
  const total = await countCandidates(o.pool, cutoff);
  let done = 0;
  const skip = (id: string, reason: string) => {
    summary.skipped.push({ id, reason });
    o.log?.info({ id, reason }, 'retention: skipped');
  };

  /** The stream, if it is final and ended before the cutoff and every projection has applied it; else why not. */
  async function check(id: string, kind: 'execution' | 'workflow'): Promise<Checked | string> {
    const streamId = kind === 'execution' ? executionStreamId(id) : workflowStreamId(id);
    const events = await o.store.readStream(streamId);
    const last = events[events.length - 1];
    if (!last) return 'no events in the store';
    let final: boolean;
    try {
      final = kind === 'execution' ? isFinal(executionKind.fold(id, events.map((e) => executionKind.read(e)))) : workflowKind.isFinal(workflowKind.fold(id, events.map((e) => workflowKind.read(e))));
    } catch (err) {
      return `its stream does not fold: ${(err as Error).message}`;
    }
    if (!final) return `in flight: its ${kind} is not final`;
    if (last.recordedAt >= cutoff) return `its last event was recorded at ${last.recordedAt.toISOString()}, after the cutoff`;
    // No projection reads workflow streams; each step execution is checked on its own.
    const behind = kind === 'execution' ? await projectionsBehind(o.pool, last.globalPosition, postgres !== undefined) : [];
    if (behind.length > 0) return `the read model has not applied its last event yet (${behind.join(', ')})`;
    return { id, streamId, events, archive: kind === 'execution' ? executionArchivePath(o.archiveDir, id) : workflowArchivePath(o.archiveDir, id) };
  }

  /**
   * Archive and remove units (one execution, or a workflow with its steps): every file first,
   * then one transaction for them all (a page of executions costs one commit). If one of them
   * moved on since its check, the transaction conflicts and each unit is tried on its own.
   */
  async function remove(units: Unit[]): Promise<boolean[]> {
    if (units.length === 0) return [];
    const files = units.flatMap((u) => [
      ...u.steps.map((s) => ({ of: s, doc: executionHistoryDocument(s.id, s.events) })),
      ...(u.workflow ? [{ of: u.workflow, doc: workflowHistoryDocument(u.workflow.id, u.workflow.events, u.steps.map((s) => s.id)) }] : []),
    ]);
    // fsyncs in parallel: the file system batches them. A file that cannot be written stops the run
    // before anything is removed from the store, in one line naming where and why.
    await mapLimit(files, 8, async (f) => {
      f.of.archive = await archivePathFor(f.of.archive, f.doc);
      await writeDurably(f.of.archive, f.doc);
    }).catch((err: unknown) => {
      throw archiveUnwritable(o.archiveDir, err);
    });
    const all = units.flatMap((u) => (u.workflow ? [u.workflow, ...u.steps] : u.steps));
    const records = all.map((s) => ({ streamId: s.streamId, events: s.events.length, lastEventAt: s.events[s.events.length - 1]!.recordedAt, archive: s.archive }));
    const histories = new Map(units.flatMap((u) => u.steps.map((s) => [s.id, s.events] as const)));
    try {
      await inTransaction(o.pool, async (client) => {
        await recordArchived(client, records, !postgres);
        if (postgres) {
          for (const s of all) {
            const { deleted } = await postgres.deleteStreamWithin(client, s.streamId, { expectedRevision: s.events[s.events.length - 1]!.revision });
            if (deleted === 0) throw new RemovedMeanwhile(`${s.streamId} was removed meanwhile`);
          }
        } else {
          await o.store.snapshots?.delete(all.map((s) => s.streamId), client); // Postgres's deleteStreamWithin does this itself
        }
        await removeFromReadModel(client, histories);
      });
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) && !(err instanceof RemovedMeanwhile)) throw err;
      if (units.length === 1) return [false]; // it moved on since the check: not final after all
      const each: boolean[] = [];
      for (const u of units) each.push(...(await remove([u])));
      return each;
    }
    if (!postgres) {
      for (const s of all) await deleteArchived(o, s.streamId, s.events.length);
      await deleteDone(o.pool, all.map((s) => s.streamId));
    }
    return units.map(() => true);
  }

  let after: ExecutionCandidate | undefined;
  for (;;) {
    const page = await executionCandidates(o.pool, cutoff, batchSize, after);
    const ready: Checked[] = [];
    for (const c of page) {
      if (o.signal?.aborted) break;
      const checked = await check(c.executionId, 'execution');
      if (typeof checked === 'string') skip(c.executionId, checked);
      else ready.push(checked);
    }
    const removed = o.dryRun ? ready.map(() => true) : await remove(ready.map((c) => ({ steps: [c] })));
    ready.forEach((c, i) => {
      if (!removed[i]) return skip(c.id, 'it moved on, or another run removed it, while being archived');
      summary.executions += 1;
      summary.events += c.events.length;
    });
    done += page.length;
    o.onProgress?.(done, total);
    if (page.length < batchSize || o.signal?.aborted) break;
    after = page[page.length - 1];
  }

  let afterWorkflow: string | undefined;
  for (;;) {
    const page = await workflowCandidates(o.pool, cutoff, batchSize, afterWorkflow);
    for (const workflowId of page) {
      if (o.signal?.aborted) break;
      await archiveWorkflow(workflowId);
      o.onProgress?.(++done, total);
    }
    if (page.length < batchSize || o.signal?.aborted) break;
    afterWorkflow = page[page.length - 1];
  }

  async function archiveWorkflow(workflowId: string): Promise<void> {
    const wf = await check(workflowId, 'workflow');
    if (typeof wf === 'string') return skip(`workflow ${workflowId}`, wf);
    const scheduled = wf.events.filter((e) => e.type === 'WorkflowStepScheduled').map((e) => (e.data as { executionId: string }).executionId);
    const ids = [...new Set([...scheduled, ...(await workflowExecutionIds(o.pool, workflowId))])];
    const steps: Checked[] = [];
    for (const id of ids) {
      const step = await check(id, 'execution');
      if (typeof step === 'string') return skip(`workflow ${workflowId}`, `step execution ${id}: ${step}`);
      steps.push(step);
    }
    if (!o.dryRun && !(await remove([{ steps, workflow: wf }]))[0]) return skip(`workflow ${workflowId}`, 'it moved on while being archived');
    summary.workflows += 1;
    summary.executions += steps.length;
    summary.events += wf.events.length + steps.reduce((n, s) => n + s.events.length, 0);
  }

  summary.ms = Math.round(performance.now() - started);
  return summary;
}

/**
 * EventStoreDB: delete an archived stream (no transaction spans it and the read model) at the
 * revision its archive ends at, never at whatever it holds now: an event appended after the
 * archive was written is in no archive, and is not deleted with the rest. Such a stream (which a
 * final execution's machine never lets happen) is left in place and said so.
 */
async function deleteArchived(o: RetentionOptions, streamId: string, archivedEvents: number): Promise<void> {
  try {
    await o.store.deleteStream(streamId, { expectedRevision: BigInt(archivedEvents - 1) });
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
    o.log?.error({ streamId, archivedEvents, err }, 'retention: the stream gained events after it was archived; left in place (its archive file holds the first ones)');
  }
}

/** EventStoreDB: streams recorded as archived whose deletion a crash interrupted. */
async function finishPendingDeletes(o: RetentionOptions): Promise<void> {
  for (;;) {
    const pending = await pendingDeletes(o.pool, 100);
    if (pending.length === 0) return;
    for (const { streamId, events } of pending) await deleteArchived(o, streamId, events);
    await deleteDone(o.pool, pending.map((p) => p.streamId));
  }
}
