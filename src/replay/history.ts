// A history: one execution's stored events in a portable form. It is what `baton export`
// writes and `baton replay --file` reads, so a history can travel from production into a bug
// report or a regression test and be replayed with no database.
import { constants as fsConstants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { ExecutionEvent } from '../../schemas/events.ts';
import { BatonError, InvalidEventError, parseOrThrow } from '../errors.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';
import { UUID } from '../ids.ts';
import { droppedFields } from '../input/dropped-fields.ts';
import { repeatedJsonKey } from '../input/duplicate-keys.ts';

export interface HistoryEvent {
  eventId: string;
  /** 0-based position in the stream. */
  revision: number;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  /** When the store committed it (ISO). */
  recordedAt: string;
}

export const HISTORY_FORMAT = 'baton.execution-history';
/** The largest history file read: under V8's longest string (~512 MiB), which a read of the whole file needs. */
export const MAX_HISTORY_FILE_BYTES = 500 * 1024 * 1024;
const formatMiB = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
export const HISTORY_FORMAT_VERSION = 1;
/** A workflow's own stream, as retention archives it beside its steps' execution histories (src/retention/archive-file.ts). */
export const WORKFLOW_HISTORY_FORMAT = 'baton.workflow-history';

// What every stored execution event has, checked here so that an edited file is refused naming
// the field, not replayed into a TypeError inside the machine (`data: null`) or a riddle
// (`by` missing: "undefined is not the owner"). An event the current machine version wrote is
// held to today's event catalog as well (catalogProblems); older ones to this envelope only, as
// their fields were those of their day (ExecutionRequested's parentId, say).
const HistoryEventSchema = z.strictObject({
  eventId: z.string().min(1),
  revision: z.number().int().min(0),
  type: z.string().min(1),
  data: z.record(z.string(), z.unknown()),
  metadata: z.looseObject({ by: z.string().min(1), machineVersion: z.string().min(1).optional() }),
  recordedAt: z.iso.datetime({ offset: true }),
});

const HistoryDocumentSchema = z.strictObject({
  format: z.literal(HISTORY_FORMAT),
  formatVersion: z.literal(HISTORY_FORMAT_VERSION),
  executionId: z.string().regex(UUID, 'must be an execution id (a uuid)'),
  exportedAt: z.iso.datetime({ offset: true }).optional(),
  events: z.array(HistoryEventSchema).min(1, 'a history holds at least its ExecutionRequested event'),
});
export type HistoryDocument = Omit<z.infer<typeof HistoryDocumentSchema>, 'events'> & { events: HistoryEvent[] };

// Problems listed at most: a systematic edit would otherwise repeat one per event.
const MAX_PROBLEMS = 10;

/**
 * What today's event catalog finds wrong with the events the current machine version wrote: an
 * unknown type, a field no such event has, a NUL byte, a value out of range. Each named by its
 * place (`events.4.data.extra: unknown field`). A store never held such an event: the catalog
 * checked every one as it was appended.
 */
function catalogProblems(events: readonly HistoryEvent[]): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  for (const [i, e] of events.entries()) {
    if (problems.length >= MAX_PROBLEMS) break;
    if (e.metadata['machineVersion'] !== MACHINE_VERSION) continue;
    const r = ExecutionEvent.safeParse({ type: e.type, data: e.data, metadata: e.metadata });
    if (!r.success) {
      problems.push(...r.error.issues.map((issue) => ({ path: [`events.${i}`, ...issue.path].join('.'), message: issue.message })));
      continue;
    }
    const dropped = [...droppedFields(e.data, r.data.data, `events.${i}.data`), ...droppedFields(e.metadata, r.data.metadata, `events.${i}.metadata`)];
    problems.push(...dropped.map((path) => ({ path, message: 'unknown field' })));
  }
  return problems.slice(0, MAX_PROBLEMS);
}

export function fromStored(e: StoredEvent): HistoryEvent {
  return { eventId: e.eventId, revision: Number(e.revision), type: e.type, data: e.data, metadata: e.metadata, recordedAt: e.recordedAt.toISOString() };
}

/**
 * The domain event a stored or history event carries, without re-validating: every event was
 * validated when it was appended, and re-parsing costs ~3.5 µs an event (350 ms on a
 * 100,000-event stream). The machine still refuses anything out of place.
 */
export const asExecutionEvent = (e: Pick<HistoryEvent, 'type' | 'data' | 'metadata'>): ExecutionEvent => ({ type: e.type, data: e.data, metadata: e.metadata }) as ExecutionEvent;

export function toHistoryDocument(executionId: string, events: readonly HistoryEvent[], exportedAt = new Date()): HistoryDocument {
  return { format: HISTORY_FORMAT, formatVersion: HISTORY_FORMAT_VERSION, executionId, exportedAt: exportedAt.toISOString(), events: [...events] };
}

/**
 * Validate a history document (parsed JSON): its shape, and that its events are one stream's
 * revisions 0, 1, 2… in order. Errors name the field and the reason.
 */
export function parseHistoryDocument(value: unknown, source = 'history'): HistoryDocument {
  const doc = parseOrThrow(HistoryDocumentSchema, value, source) as HistoryDocument;
  const gap = doc.events.findIndex((e, i) => e.revision !== i);
  if (gap >= 0) {
    throw new InvalidEventError(source, [{ path: `events.${gap}.revision`, message: `expected revision ${gap} (events must be the whole stream, in order), got ${doc.events[gap]!.revision}` }]);
  }
  const problems = catalogProblems(doc.events);
  if (problems.length > 0) throw new InvalidEventError(source, problems);
  // Event ids are unique store-wide: a history holding one twice was edited, and no store could hold it.
  const firstOf = new Map<string, number>();
  for (const [i, e] of doc.events.entries()) {
    const first = firstOf.get(e.eventId.toLowerCase());
    if (first !== undefined) throw new InvalidEventError(source, [{ path: `events.${i}.eventId`, message: `the same event id as events.${first} (${e.eventId}): an event id is stored once` }]);
    firstOf.set(e.eventId.toLowerCase(), i);
  }
  return doc;
}

/**
 * A workflow's archive read where an execution's history belongs: said so, with the steps'
 * execution ids it lists, instead of a schema error about `format` and `executionId`.
 */
function workflowHistoryRefusal(value: unknown, source: string): BatonError | undefined {
  if (typeof value !== 'object' || value === null || (value as { format?: unknown }).format !== WORKFLOW_HISTORY_FORMAT) return undefined;
  const { workflowId, executions } = value as { workflowId?: unknown; executions?: unknown };
  const ids = Array.isArray(executions) ? executions.filter((e): e is string => typeof e === 'string' && UUID.test(e)) : [];
  const which = typeof workflowId === 'string' && workflowId.length <= 200 ? ` of workflow ${JSON.stringify(workflowId)}` : '';
  const steps =
    ids.length === 0
      ? 'it lists no step executions'
      : `its steps are ${ids.length <= 10 ? ids.join(', ') : `${ids.slice(0, 10).join(', ')} and ${ids.length - 10} more`}, each archived as execution-<id>.json beside it`;
  return new BatonError(
    `${source} is a workflow history${which} (format ${WORKFLOW_HISTORY_FORMAT}), not an execution's: a workflow's steps are inspected by their execution ids (\`baton inspect <execution id>\`, or --file with the step's own archive file); ${steps}`,
  );
}

export async function readHistoryFile(path: string): Promise<HistoryDocument> {
  let text: string;
  let handle: FileHandle | undefined;
  try {
    // Non-blocking: opening a FIFO would otherwise wait for a writer that never comes.
    handle = await open(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    const st = await handle.stat();
    // A device or a pipe has no size to check (stat says 0): /dev/zero was read to ~640 MB, then
    // failed with "Invalid string length". A history is a file `baton export` or retention wrote.
    // (A directory fails the read below with EISDIR, kept as the cause: archived-history.ts reports it so.)
    if (!st.isFile() && !st.isDirectory()) throw new BatonError(`history file ${path} is not a regular file (a device, pipe or socket); give the path of a history file`);
    // Past this, reading it whole fails with V8's "Invalid string length", which tells nobody why.
    if (st.size > MAX_HISTORY_FILE_BYTES) throw new BatonError(`history file ${path} is ${formatMiB(st.size)}: larger than Baton reads (at most ${formatMiB(MAX_HISTORY_FILE_BYTES)})`);
    text = await handle.readFile('utf8');
  } catch (err) {
    if (err instanceof BatonError) throw err;
    throw new BatonError(`history file ${path} cannot be read: ${(err as Error).message}`, { cause: err });
  } finally {
    await handle?.close();
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BatonError(`history file ${path} is not JSON: ${(err as Error).message}`, { cause: err });
  }
  // JSON.parse keeps the last of a repeated key (`"format"` twice): refused, as every CLI JSON input is.
  const repeated = repeatedJsonKey(text);
  if (repeated) {
    const where = [...repeated.path, repeated.key].join('.');
    throw new InvalidEventError(`history file ${path}`, [{ path: where, message: 'appears twice in one object (JSON would keep only the last): give it once' }]);
  }
  const workflow = workflowHistoryRefusal(value, `history file ${path}`);
  if (workflow) throw workflow;
  return parseHistoryDocument(value, `history file ${path}`);
}
