// Schedules as the actor runtime sees them: streams `schedule-<id>`, the schedule machine's
// decisions, and its refusals as ScheduleTransitionError. Stored events are validated when
// read: the stream may be old or foreign. A schedule's stream grows by one event per tick, so
// it is read whole only up to MAX_SCHEDULE_EVENTS (the retention work will snapshot longer ones).
import { SCHEDULE_MACHINE_VERSION, decideSchedule, foldSchedule, startSchedule, type ScheduleSnapshot } from '../../actors/schedule.machine.ts';
import { SCHEDULE_STREAM_PREFIX, ScheduleEvent, scheduleIdOfStream, scheduleStreamId } from '../../schemas/schedule-events.ts';
import { BatonError, parseOrThrow } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { ActorKind } from './actor-kind.ts';
import { createActorRuntime, type ActorRuntime, type ActorRuntimeOptions } from './actor-runtime.ts';

/** A year of ticks every minute, and then some. */
export const MAX_SCHEDULE_EVENTS = 1_000_000;

/** The machine refused a schedule event: the schedule's state does not allow it. */
export class ScheduleTransitionError extends BatonError {
  constructor(readonly scheduleId: string, readonly eventType: string, reason: string) {
    super(`schedule ${scheduleId}: ${eventType} refused: ${reason}`);
  }
}

export const asScheduleEvent = (e: { type: string; data: unknown; metadata: unknown }): ScheduleEvent =>
  parseOrThrow(ScheduleEvent, { type: e.type, data: e.data, metadata: e.metadata }, `stored ${e.type} event`);

export const scheduleKind: ActorKind<ScheduleSnapshot, ScheduleEvent> = {
  name: 'schedule',
  machineVersion: SCHEDULE_MACHINE_VERSION,
  streamPrefix: SCHEDULE_STREAM_PREFIX,
  streamId: scheduleStreamId,
  idOf: scheduleIdOfStream,
  read: asScheduleEvent,
  make: (c, occurredAt) =>
    parseOrThrow(
      ScheduleEvent,
      { type: c.type, data: c.data, metadata: { by: c.by, occurredAt, machineVersion: SCHEDULE_MACHINE_VERSION, ...(c.correlationId && { correlationId: c.correlationId }) } },
      `${c.type} event`,
    ),
  decide(id, before, event) {
    if (before === undefined) {
      if (event.type === 'ScheduleCreated') return { ok: true, snapshot: startSchedule(event) };
      return { ok: false, error: new ScheduleTransitionError(id, event.type, `no schedule "${id}"`) };
    }
    const d = decideSchedule(before, event);
    return d.ok ? d : { ok: false, error: new ScheduleTransitionError(id, event.type, d.reason) };
  },
  fold(id, events) {
    try {
      return foldSchedule(events);
    } catch (err) {
      throw new BatonError(`schedule ${id}: its stream does not fold through schedule machine version ${SCHEDULE_MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
    }
  },
  isFinal: (s) => s.status === 'done',
  maxEvents: MAX_SCHEDULE_EVENTS,
};

export type ScheduleRuntime = ActorRuntime<ScheduleSnapshot, ScheduleEvent>;

export const createScheduleRuntime = (store: EventStore, options: ActorRuntimeOptions = {}): ScheduleRuntime => createActorRuntime(store, scheduleKind, options);
