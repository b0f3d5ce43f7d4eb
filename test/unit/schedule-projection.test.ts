// The schedules projection's fold, pure: on every generated path it agrees with the machine
// (status, counts, last tick), resumes from its own row, and a replayed event changes nothing.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { foldScheduleRow, snapshotFromScheduleRow, type ScheduleRow } from '../../projections/schedules.ts';
import { foldSchedule } from '../../actors/schedule.machine.ts';
import type { ScheduleEvent } from '../../schemas/schedule-events.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { generateSchedulePaths } from '../support/schedule-paths.ts';

const stored = (id: string, events: readonly ScheduleEvent[]): StoredEvent[] =>
  events.map((e, i) => ({ eventId: randomUUID(), streamId: `schedule-${id}`, revision: BigInt(i), globalPosition: BigInt(i + 1), type: e.type, data: e.data, metadata: e.metadata, recordedAt: new Date(e.metadata.occurredAt) }));

const foldAll = (events: readonly StoredEvent[], start?: ScheduleRow) => events.reduce<ScheduleRow | undefined>((row, e) => foldScheduleRow(row, e).row, start);

describe('schedules fold', () => {
  it('agrees with the machine on every generated path, resumes from its row, and ignores replays', () => {
    const paths = generateSchedulePaths();
    for (const { events } of paths) {
      const s = stored('s1', events);
      const row = foldAll(s)!;
      const machine = foldSchedule(events);
      expect(row.status).toBe(String(machine.value));
      expect({ fired: row.fired, skipped: row.skipped, lastTickAt: row.lastTickAt }).toEqual({
        fired: machine.context.fired,
        skipped: machine.context.skipped,
        lastTickAt: machine.context.recent.at(-1)?.tickAt ?? null,
      });
      expect(snapshotFromScheduleRow(row).value).toBe(machine.value);
      // Resuming halfway through gives the same row; every event again changes nothing.
      const half = Math.floor(s.length / 2);
      expect(foldAll(s.slice(half), foldAll(s.slice(0, half)))).toEqual(row);
      expect(foldAll(s, row)).toEqual(row);
    }
  });

  it('refuses an event before the stream’s ScheduleCreated, and counts refusals', () => {
    const [created, ...rest] = stored('s2', generateSchedulePaths().find((p) => p.events.length >= 3)!.events);
    expect(foldScheduleRow(undefined, rest[0]!).refused).toMatch(/before the stream's ScheduleCreated/);
    const row = foldScheduleRow(undefined, created!).row!;
    const bogus = { ...rest[0]!, revision: 5n, type: 'ScheduleResumed', data: {} };
    const r = foldScheduleRow(row, bogus);
    expect(r.refused).toBe('the schedule is not paused');
    expect(r.row!.refusedEvents).toBe(1);
  });
});
