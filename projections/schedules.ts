// The `schedules` projection: each schedule's stream folded through the schedule machine
// itself, resuming from the row (its status and context), so a row is exactly the machine's
// state after its last event. Counts of fired and skipped ticks come from the machine's context.
import type pg from 'pg';
import { decideSchedule, scheduleMachine, startSchedule, type ScheduleContext, type ScheduleSnapshot } from '../actors/schedule.machine.ts';
import { SCHEDULE_STREAM_PREFIX, scheduleIdOfStream, type ScheduleEvent } from '../schemas/schedule-events.ts';
import type { StoredEvent } from '../src/eventstore/event-store.ts';
import type { BatchResult, Projection } from './projection.ts';
import { fromColumns, qualified, selectRowsByKeys, upsertRows } from './rows.ts';

export interface ScheduleRow {
  scheduleId: string;
  revision: number;
  status: string;
  triggerKind: string;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  targetKind: string;
  action: string | null;
  overlap: string;
  fired: number;
  skipped: number;
  lastTickAt: string | null;
  lastTargetId: string | null;
  createdAt: string;
  updatedAt: string;
  refusedEvents: number;
  context: ScheduleContext;
}

function rowFromSnapshot(scheduleId: string, revision: number, s: ScheduleSnapshot, refusedEvents: number): ScheduleRow {
  const c = s.context;
  const t = c.spec.trigger;
  const last = c.recent[c.recent.length - 1];
  return {
    scheduleId,
    revision,
    status: String(s.value),
    triggerKind: t.kind,
    cron: t.kind === 'cron' ? t.cron : null,
    timezone: t.kind === 'cron' ? t.timezone : null,
    everyMs: t.kind === 'every' ? t.everyMs : null,
    targetKind: c.spec.target.kind,
    action: c.spec.target.kind === 'action' ? c.spec.target.action : null,
    overlap: c.spec.overlap,
    fired: c.fired,
    skipped: c.skipped,
    lastTickAt: last?.tickAt ?? null,
    lastTargetId: last?.target.id ?? null,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    refusedEvents,
    // Without undefined keys, so a rebuilt row compares equal to a live one.
    context: JSON.parse(JSON.stringify(c)) as ScheduleContext,
  };
}

export const snapshotFromScheduleRow = (row: ScheduleRow): ScheduleSnapshot => scheduleMachine.resolveState({ value: row.status as never, context: row.context });

const asEvent = (e: StoredEvent) => ({ type: e.type, data: e.data, metadata: e.metadata }) as ScheduleEvent;

/** Fold one stored event into its schedule's row. Pure; events at or below the row's revision change nothing. */
export function foldScheduleRow(row: ScheduleRow | undefined, stored: StoredEvent): { row: ScheduleRow | undefined; refused?: string } {
  const id = scheduleIdOfStream(stored.streamId);
  if (id === undefined) return { row };
  const revision = Number(stored.revision);
  if (row && revision <= row.revision) return { row };
  const event = asEvent(stored);
  if (!row) {
    if (revision !== 0 || event.type !== 'ScheduleCreated') return { row, refused: `revision ${revision} (${event.type}) arrived before the stream's ScheduleCreated` };
    try {
      return { row: rowFromSnapshot(id, 0, startSchedule(event), 0) };
    } catch (err) {
      return { row, refused: (err as Error).message };
    }
  }
  const d = decideSchedule(snapshotFromScheduleRow(row), event);
  if (!d.ok) return { row: { ...row, revision, refusedEvents: row.refusedEvents + 1 }, refused: d.reason };
  return { row: rowFromSnapshot(id, revision, d.snapshot, row.refusedEvents) };
}

const COLUMNS = ['schedule_id', 'revision', 'status', 'trigger_kind', 'cron', 'timezone', 'every_ms', 'target_kind', 'action', 'overlap', 'fired', 'skipped', 'last_tick_at', 'last_target_id', 'created_at', 'updated_at', 'refused_events', 'context'];
const BIGINTS = ['revision', 'every_ms', 'fired', 'skipped'];
export const scheduleRowFromDb = (r: Record<string, unknown>) => fromColumns<ScheduleRow>(r, BIGINTS);

export const schedulesProjection: Projection = {
  name: 'schedules',
  version: 1,
  streamPrefixes: [SCHEDULE_STREAM_PREFIX],
  tables: [{ name: 'schedules', key: ['schedule_id'] }],
  ddl: new URL('./schedules.sql', import.meta.url),
  async apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[]): Promise<BatchResult> {
    const table = qualified(schema, 'schedules');
    const ids = [...new Set(events.map((e) => scheduleIdOfStream(e.streamId)).filter((id) => id !== undefined))];
    if (ids.length === 0) return { changedExecutions: [], refused: [] };
    const rows = new Map<string, ScheduleRow>((await selectRowsByKeys(client, table, 'schedule_id', 'text', ids)).map((row) => [row['schedule_id'] as string, scheduleRowFromDb(row)]));
    const refused: BatchResult['refused'] = [];
    for (const e of events) {
      const id = scheduleIdOfStream(e.streamId);
      if (id === undefined) continue;
      const next = foldScheduleRow(rows.get(id), e);
      if (next.refused) refused.push({ streamId: e.streamId, revision: e.revision, reason: next.refused });
      if (next.row) rows.set(id, next.row);
    }
    await upsertRows(client, table, ['schedule_id'], COLUMNS, [...rows.values()]);
    return { changedExecutions: [], refused };
  },
};
