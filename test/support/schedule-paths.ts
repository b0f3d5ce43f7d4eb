// Event builders and generated paths for the schedule machine's tests. Builders validate every
// event with the catalog's schema, so tests cannot drift from it.
import { getShortestPaths } from '@xstate/graph';
import { ScheduleEvent, type ScheduleEventOf, type ScheduleSpec } from '../../schemas/schedule-events.ts';
import { scheduleMachine, type ScheduleSnapshot } from '../../actors/schedule.machine.ts';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
/** A fixed instant `seconds` after the test epoch. */
export const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

export const spec = (o: Partial<ScheduleSpec> = {}): ScheduleSpec => ({
  trigger: { kind: 'every', everyMs: 60_000 },
  target: { kind: 'action', action: 'core.noop', input: null },
  jitterMs: 0,
  overlap: 'allow',
  catchUp: 0,
  ...o,
});

const build = <T extends ScheduleEvent['type']>(type: T, data: ScheduleEventOf<T>['data'], occurredAt: string) =>
  ScheduleEvent.parse({ type, data, metadata: { by: 'executor', occurredAt } }) as ScheduleEventOf<T>;

export const ev = {
  created: (s: ScheduleSpec = spec(), o: { at?: string } = {}) => build('ScheduleCreated', { spec: s }, o.at ?? at(0)),
  updated: (s: ScheduleSpec, o: { at?: string } = {}) => build('ScheduleUpdated', { spec: s }, o.at ?? at(30)),
  paused: (o: { at?: string } = {}) => build('SchedulePaused', { reason: 'maintenance' }, o.at ?? at(90)),
  resumed: (o: { at?: string } = {}) => build('ScheduleResumed', {}, o.at ?? at(150)),
  deleted: (o: { at?: string } = {}) => build('ScheduleDeleted', { reason: 'not needed' }, o.at ?? at(200)),
  /** Fired a second after its tick unless `at` says otherwise. */
  fired: (tickSeconds: number, o: { at?: string; manual?: boolean; fireAt?: string } = {}) =>
    build(
      'ScheduleTickFired',
      { tickAt: at(tickSeconds), fireAt: o.fireAt ?? at(tickSeconds), target: { kind: 'action', id: `exec-${tickSeconds}${o.manual ? '-manual' : ''}` }, manual: o.manual ?? false },
      o.at ?? at(tickSeconds + 1),
    ),
  skipped: (tickSeconds: number, count = 1, reason: 'missed' | 'overlap' = 'overlap', o: { at?: string } = {}) =>
    build('ScheduleTickSkipped', { tickAt: at(tickSeconds), count, reason }, o.at ?? at(tickSeconds + 1)),
};

/**
 * Candidate events, including ones the machine must refuse: a tick off the grid, one fired
 * before its time, a resume while active. Ticks every 60 s from creation at 0; pause at 90,
 * resume at 150, so tick 120 fell in the pause.
 */
export function scheduleAlphabet(): ScheduleEvent[] {
  return [
    ev.updated(spec({ jitterMs: 5_000 })),
    ev.updated(spec({ trigger: { kind: 'every', everyMs: 30_000 } })),
    ev.paused(),
    ev.resumed(),
    ev.deleted(),
    ev.fired(60),
    ev.fired(120),
    ev.fired(180),
    ev.fired(90),
    ev.fired(75, { manual: true }),
    ev.fired(240, { at: at(239) }), // before its time
    ev.skipped(60),
    ev.skipped(120, 2, 'missed'),
    ev.skipped(61),
  ];
}

export interface SchedulePath {
  events: ScheduleEvent[];
  final: ScheduleSnapshot;
}

/** One shortest path from ScheduleCreated to every distinct reachable (state, context). */
export function generateSchedulePaths(): SchedulePath[] {
  const created = ev.created();
  const paths = getShortestPaths(scheduleMachine, {
    input: created,
    events: scheduleAlphabet(),
    // Counters and the list of recent ticks do not change what may happen next; leaving them out
    // keeps the graph finite (a manual trigger may be repeated forever).
    serializeState: (snapshot) => {
      const { fired: _f, skipped: _s, recent: _r, ...rest } = snapshot.context;
      return JSON.stringify({ value: snapshot.value, context: rest });
    },
    serializeEvent: (event) => JSON.stringify(event),
    limit: 50_000,
  });
  return paths.map((path) => ({ events: [created, ...path.steps.slice(1).map((s) => s.event)], final: path.state }));
}
