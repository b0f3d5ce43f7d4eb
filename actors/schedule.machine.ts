// The schedule machine: which event may follow which on one schedule's stream. Pure like the
// execution machine: no I/O, no clock (times come from the events and, for planning, from the
// caller). It keeps a cursor, the last tick dealt with: a tick is recorded (fired or skipped)
// only after the cursor and only when it is one of the trigger's ticks, so the same tick can
// never be recorded twice, whichever executor tries. `schedulePlan` reads a snapshot and a
// time and says which ticks are due, which were missed, and when the next one falls.
import { assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { stepperOf } from './stepper.ts';
import { foldWith } from './fold.ts';
import { END_OF_DATES, isTick, jitterOf, nextTickAfter, ticksAfter } from './schedule-ticks.ts';
import type { FiredTarget, ScheduleEvent, ScheduleEventOf, ScheduleSpec } from '../schemas/schedule-events.ts';

export const SCHEDULE_MACHINE_VERSION = '1';

export interface ScheduleContext {
  spec: ScheduleSpec;
  createdAt: string;
  updatedAt: string;
  /** Where an interval's grid starts (startAt, creation, or the update that changed the trigger). */
  anchorAt: string;
  /** The last tick dealt with (fired or skipped), or the time from which ticks count (creation, resume). */
  cursor: string;
  pausedAt?: string;
  pauseReason?: string;
  fired: number;
  skipped: number;
  /** The latest fired ticks, newest last (at most RECENT_FIRED): their targets are checked to exist. */
  recent: { tickAt: string; fireAt: string; target: FiredTarget; manual: boolean; previous?: FiredTarget }[];
  deletedAt?: string;
}

/** Fired ticks a snapshot remembers: the hosts make sure each one's target was started. */
export const RECENT_FIRED = 5;

/**
 * A tick this late (past its fire time) is missed, and runs only under the catch-up policy; a tick
 * of a schedule that ticks more often than that is missed sooner, once it is as late as the gap to
 * its next tick (at least MIN_LATE_MS). With one grace of a minute for all, an every-1s schedule
 * ran its last ~60 ticks in a burst after every outage, whatever its catch-up said.
 */
export const MISSED_AFTER_MS = 60_000;
/** The least lateness a tick is allowed before it counts as missed: a busy executor's delay, not an outage. */
export const MIN_LATE_MS = 5_000;

type CreatedEvent = ScheduleEventOf<'ScheduleCreated'>;
type TickEvent = ScheduleEventOf<'ScheduleTickFired'> | ScheduleEventOf<'ScheduleTickSkipped'>;

const later = (a: string, b: string) => (Date.parse(a) >= Date.parse(b) ? a : b);
// An interval ticks from its start date, else from the whole second after it was set (so `every 30s` ticks on whole seconds).
const anchorFor = (spec: ScheduleSpec, at: string) =>
  spec.startAt !== undefined && spec.trigger.kind === 'every' ? spec.startAt : new Date(Math.ceil(Date.parse(at) / 1000) * 1000).toISOString();

/** May this scheduled tick be recorded now? After the cursor, on the grid, and not after a pause began. */
function tickFits(c: ScheduleContext, paused: boolean, tickAt: string): boolean {
  if (Date.parse(tickAt) <= Date.parse(c.cursor)) return false;
  if (paused && (c.pausedAt === undefined || Date.parse(tickAt) > Date.parse(c.pausedAt))) return false;
  return isTick(c.spec, c.anchorAt, tickAt);
}

function fireFits(c: ScheduleContext, paused: boolean, e: ScheduleEventOf<'ScheduleTickFired'>): boolean {
  // A tick never fires before its time.
  if (Date.parse(e.data.fireAt) > Date.parse(e.metadata.occurredAt) || Date.parse(e.data.fireAt) < Date.parse(e.data.tickAt)) return false;
  return e.data.manual || tickFits(c, paused, e.data.tickAt);
}

export const scheduleMachine = setup({
  types: {
    context: {} as ScheduleContext,
    events: {} as ScheduleEvent,
    input: {} as CreatedEvent,
  },
  guards: {
    fires: ({ context, event }) => event.type === 'ScheduleTickFired' && fireFits(context, false, event),
    firesWhilePaused: ({ context, event }) => event.type === 'ScheduleTickFired' && fireFits(context, true, event),
    skips: ({ context, event }) => event.type === 'ScheduleTickSkipped' && tickFits(context, false, event.data.tickAt),
    skipsWhilePaused: ({ context, event }) => event.type === 'ScheduleTickSkipped' && tickFits(context, true, event.data.tickAt),
  },
  actions: {
    recordFired: assign(({ context, event }) => {
      assertEvent(event, 'ScheduleTickFired');
      const { tickAt, fireAt, target, manual, previous } = event.data;
      return {
        fired: context.fired + 1,
        recent: [...context.recent, { tickAt, fireAt, target, manual, ...(previous && { previous }) }].slice(-RECENT_FIRED),
        // A manual run is not one of the trigger's ticks: the cursor stays.
        cursor: manual ? context.cursor : tickAt,
      };
    }),
    recordSkipped: assign(({ context, event }) => {
      assertEvent(event, 'ScheduleTickSkipped');
      return { skipped: context.skipped + event.data.count, cursor: event.data.tickAt };
    }),
    update: assign(({ context, event }) => {
      assertEvent(event, 'ScheduleUpdated');
      const at = event.metadata.occurredAt;
      const spec = event.data.spec;
      const sameGrid = JSON.stringify(spec.trigger) === JSON.stringify(context.spec.trigger) && spec.startAt === context.spec.startAt;
      // A new trigger counts its ticks from the update on; the old grid's ticks are not due any more.
      return sameGrid ? { spec, updatedAt: at } : { spec, updatedAt: at, anchorAt: anchorFor(spec, at), cursor: later(context.cursor, at) };
    }),
    pause: assign(({ event }) => {
      assertEvent(event, 'SchedulePaused');
      return { pausedAt: event.metadata.occurredAt, pauseReason: event.data.reason };
    }),
    // Ticks that fell while it was paused are not due: they count from the resume on.
    resume: assign(({ context, event }) => {
      assertEvent(event, 'ScheduleResumed');
      return { pausedAt: undefined, pauseReason: undefined, cursor: later(context.cursor, event.metadata.occurredAt) };
    }),
    delete: assign(({ event }) => ({ deletedAt: event.metadata.occurredAt })),
  },
}).createMachine({
  id: 'schedule',
  initial: 'Active',
  context: ({ input }) => ({
    spec: input.data.spec,
    createdAt: input.metadata.occurredAt,
    updatedAt: input.metadata.occurredAt,
    anchorAt: anchorFor(input.data.spec, input.metadata.occurredAt),
    cursor: input.metadata.occurredAt,
    fired: 0,
    skipped: 0,
    recent: [],
  }),
  states: {
    Active: {
      on: {
        ScheduleTickFired: { guard: 'fires', actions: 'recordFired' },
        ScheduleTickSkipped: { guard: 'skips', actions: 'recordSkipped' },
        ScheduleUpdated: { actions: 'update' },
        SchedulePaused: { target: 'Paused', actions: 'pause' },
        ScheduleDeleted: { target: 'Deleted', actions: 'delete' },
      },
    },
    // No tick is due; one that fell before the pause may still be recorded (an executor that
    // decided it just before), and a manual trigger still runs.
    Paused: {
      on: {
        ScheduleTickFired: { guard: 'firesWhilePaused', actions: 'recordFired' },
        ScheduleTickSkipped: { guard: 'skipsWhilePaused', actions: 'recordSkipped' },
        ScheduleUpdated: { actions: 'update' },
        ScheduleResumed: { target: 'Active', actions: 'resume' },
        ScheduleDeleted: { target: 'Deleted', actions: 'delete' },
      },
    },
    Deleted: { type: 'final' },
  },
});

export type ScheduleSnapshot = SnapshotFrom<typeof scheduleMachine>;
export type ScheduleStatus = ScheduleSnapshot['value'];
export const scheduleStatuses = ['Active', 'Paused', 'Deleted'] as const satisfies readonly ScheduleStatus[];

const SAMPLE_START: CreatedEvent = {
  type: 'ScheduleCreated',
  data: { spec: { trigger: { kind: 'every', everyMs: 60_000 }, target: { kind: 'action', action: 'core.noop', input: null }, jitterMs: 0, overlap: 'allow', catchUp: 0 } },
  metadata: { by: 'executor', occurredAt: '2000-01-01T00:00:00.000Z' },
};
const step = stepperOf(scheduleMachine, SAMPLE_START);

export function startSchedule(created: ScheduleEvent): ScheduleSnapshot {
  if (created.type !== 'ScheduleCreated') throw new Error(`a schedule starts with ScheduleCreated, not ${created.type}`);
  return step.initial(created);
}

export type ScheduleDecision = { ok: true; snapshot: ScheduleSnapshot } | { ok: false; reason: string };

/** Why the machine refuses `event` here, for people. */
export function explainScheduleRefusal(snapshot: ScheduleSnapshot, event: ScheduleEvent): string {
  if (snapshot.status === 'done') return 'the schedule is deleted';
  if (event.type === 'ScheduleCreated') return 'the schedule exists already';
  if (event.type === 'ScheduleResumed') return 'the schedule is not paused';
  if (event.type === 'SchedulePaused') return 'the schedule is paused already';
  if (event.type === 'ScheduleTickFired' || event.type === 'ScheduleTickSkipped') {
    const c = snapshot.context;
    const tick = event as TickEvent;
    if (tick.type === 'ScheduleTickFired' && Date.parse(tick.data.fireAt) > Date.parse(tick.metadata.occurredAt)) return `tick ${tick.data.tickAt} cannot fire before ${tick.data.fireAt}`;
    if (Date.parse(tick.data.tickAt) <= Date.parse(c.cursor)) return `tick ${tick.data.tickAt} is not after ${c.cursor}, the last tick dealt with`;
    if (snapshot.value === 'Paused') return `tick ${tick.data.tickAt} falls after the pause began (${c.pausedAt})`;
    return `${tick.data.tickAt} is not one of the schedule's ticks`;
  }
  return `${event.type} does not fit schedule state ${String(snapshot.value)}`;
}

export function decideSchedule(snapshot: ScheduleSnapshot, event: ScheduleEvent): ScheduleDecision {
  if (snapshot.can(event)) return { ok: true, snapshot: step.next(snapshot, event) };
  return { ok: false, reason: explainScheduleRefusal(snapshot, event) };
}

/** Fold a stored schedule stream; throws naming the first event that does not fit. */
export function foldSchedule(events: readonly ScheduleEvent[]): ScheduleSnapshot {
  const [first, ...rest] = events;
  if (!first) throw new Error('cannot fold an empty schedule history');
  return foldWith(step, startSchedule(first), rest, explainScheduleRefusal, first.type);
}

export interface SchedulePlan {
  /** Ticks older than these that did not run (missed during downtime beyond the catch-up): record them as skipped first. */
  skip?: { tickAt: string; count: number };
  /** Ticks due now, oldest first, each with its fire time (jitter included). */
  fire: { tickAt: string; fireAt: string }[];
  /** When the next tick after these is due (jitter included); undefined when none will be. */
  nextAt?: string;
}

/** Ticks looked at in one plan: far more than any catch-up runs; more missed ones are skipped over in several plans. */
const PLAN_WINDOW = 10_000;

/**
 * What the schedule hosts should do at `now`, for schedule `id`. Pure: the same snapshot and
 * time give the same plan on every executor. Only an active schedule has ticks due. A tick is
 * due once its fire time (tick + jitter) has come; one later than its grace (MISSED_AFTER_MS,
 * or the gap to its next tick when shorter, but at least MIN_LATE_MS) was missed, and only the
 * newest `catchUp` missed ones still run.
 */
export function schedulePlan(id: string, snapshot: ScheduleSnapshot, now: Date): SchedulePlan {
  if (snapshot.value !== 'Active') return { fire: [] };
  const c = snapshot.context;
  const t = now.getTime();
  const fireAt = (tick: number) => tick + jitterOf(id, tick, c.spec.jitterMs);
  const due: number[] = [];
  let next: number | undefined;
  for (let tick = nextTickAfter(c.spec, c.anchorAt, Date.parse(c.cursor)); tick !== undefined; tick = nextTickAfter(c.spec, c.anchorAt, tick)) {
    if (fireAt(tick) > t || due.length >= PLAN_WINDOW) {
      next = tick;
      break;
    }
    due.push(tick);
  }
  const following = (i: number) => due[i + 1] ?? next ?? nextTickAfter(c.spec, c.anchorAt, due[i]!);
  const grace = (i: number) => {
    const after = following(i);
    return after === undefined ? MISSED_AFTER_MS : Math.min(MISSED_AFTER_MS, Math.max(MIN_LATE_MS, after - due[i]!));
  };
  const isMissed = due.map((tick, i) => t - fireAt(tick) > grace(i));
  const missed = due.filter((_, i) => isMissed[i]);
  const caughtUp = c.spec.catchUp > 0 ? missed.slice(-c.spec.catchUp) : [];
  const skipped = missed.slice(0, missed.length - caughtUp.length);
  const fire = [...caughtUp, ...due.filter((_, i) => !isMissed[i])];
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    ...(skipped.length > 0 && { skip: { tickAt: iso(skipped[skipped.length - 1]!), count: skipped.length } }),
    fire: fire.map((tick) => ({ tickAt: iso(tick), fireAt: iso(fireAt(tick)) })),
    ...(next !== undefined && { nextAt: iso(fireAt(next)) }),
  };
}

/** The next `n` fire times (jitter included) of an active or paused schedule, after `now` and the cursor. */
export function nextFireTimes(id: string, snapshot: ScheduleSnapshot, now: Date, n: number): string[] {
  if (snapshot.status === 'done') return [];
  const c = snapshot.context;
  const from = Math.max(Date.parse(c.cursor), now.getTime() - c.spec.jitterMs);
  return ticksAfter(c.spec, c.anchorAt, from, n + 1)
    .map((tick) => tick + jitterOf(id, tick, c.spec.jitterMs))
    .filter((at) => at > now.getTime() && at < END_OF_DATES)
    .slice(0, n)
    .map((ms) => new Date(ms).toISOString());
}
