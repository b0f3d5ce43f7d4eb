// Schedules as the CLI and the GraphQL API use them: create and update (checked first, see
// schedule-request.ts; nothing is written when anything is wrong), pause, resume, delete,
// trigger (a manual tick: recorded, then its target started, exactly as a due tick is), and
// show (folded from the schedule's stream, with how often it fired and its next fire times).
// The executors' schedule hosts (schedule-host.ts) fire the ticks.
import { isDeepStrictEqual } from 'node:util';
import { nextFireTimes, startSchedule, type ScheduleContext, type ScheduleSnapshot, type ScheduleStatus } from '../../actors/schedule.machine.ts';
import { scheduleStreamId, type FiredTarget, type ScheduleEvent, type ScheduleSpec } from '../../schemas/schedule-events.ts';
import type { ActionRegistry } from '../actions/registry.ts';
import { BatonError, NotFoundError, WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { stateName, type Command } from '../runtime/actor-kind.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { scheduleKind, type ScheduleRuntime } from '../runtime/schedule-kind.ts';
import type { WorkflowRuntime } from '../workflow/workflow-stream.ts';
import { tickEventId } from './schedule-host.ts';
import { checkScheduleRequest, type ScheduleFieldNames, type ScheduleRequest } from './schedule-request.ts';
import { startTarget, targetOf } from './targets.ts';
import { newId } from '../ids.ts';

export interface ScheduleServiceDeps {
  store: EventStore;
  schedules: ScheduleRuntime;
  executions: ExecutionRuntime;
  workflows: WorkflowRuntime;
  clock?: () => Date;
}

/** The schedule id is taken: by a schedule with a different definition, or by one that was deleted (`deletedAt`). */
export class ScheduleIdConflictError extends BatonError {
  constructor(readonly scheduleId: string, readonly deletedAt?: string) {
    super(
      deletedAt === undefined
        ? `schedule id "${scheduleId}" is already used by a schedule with a different definition`
        : // Its history stays under the id (replay, `schedule show`), so a new schedule needs another.
          `schedule id "${scheduleId}" belonged to a schedule deleted at ${deletedAt}; an id is not used again once its schedule is deleted (its history stays under it): choose another id`,
    );
  }
}

/** The schedule is deleted: it cannot be changed or triggered any more. */
export class ScheduleDeletedError extends BatonError {
  constructor(readonly scheduleId: string, what: string) {
    super(`schedule ${scheduleId} is deleted; ${what}`);
  }
}

/** How many next fire times `show` lists. */
export const NEXT_FIRE_TIMES = 5;

export interface ScheduleView {
  scheduleId: string;
  status: ScheduleStatus;
  spec: ScheduleSpec;
  createdAt: string;
  updatedAt: string;
  pausedAt: string | null;
  pauseReason: string | null;
  deletedAt: string | null;
  /** Ticks fired (manual ones included) and skipped (missed or for overlap) so far. */
  fired: number;
  skipped: number;
  /** The latest fired ticks, newest last. */
  recent: ScheduleContext['recent'];
  /** The next fire times (jitter included); none while paused or once deleted. */
  nextFireTimes: string[];
  revision: bigint;
}

export function describeSchedule(scheduleId: string, snapshot: ScheduleSnapshot, revision: bigint, now: Date): ScheduleView {
  const c = snapshot.context;
  return {
    scheduleId,
    status: snapshot.value,
    spec: c.spec,
    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
    pausedAt: c.pausedAt ?? null,
    pauseReason: c.pauseReason ?? null,
    deletedAt: c.deletedAt ?? null,
    fired: c.fired,
    skipped: c.skipped,
    recent: c.recent,
    nextFireTimes: snapshot.value === 'Active' ? nextFireTimes(scheduleId, snapshot, now, NEXT_FIRE_TIMES) : [],
    revision,
  };
}

const now = (deps: ScheduleServiceDeps) => (deps.clock ?? (() => new Date()))();

export async function showSchedule(deps: ScheduleServiceDeps, scheduleId: string): Promise<ScheduleView> {
  const loaded = await deps.schedules.load(scheduleId, { fresh: true });
  return describeSchedule(scheduleId, loaded.snapshot, loaded.revision!, now(deps));
}

export interface CreateScheduleResult {
  /** False when the id found an earlier schedule with the same definition. */
  created: boolean;
  schedule: ScheduleView;
}

/** Check, then append ScheduleCreated to a new stream. With `id`, the same definition again returns the first schedule. */
export async function createSchedule(
  deps: ScheduleServiceDeps & { actions: Pick<ActionRegistry, 'get' | 'names'> },
  request: ScheduleRequest,
  names: ScheduleFieldNames,
): Promise<CreateScheduleResult> {
  const at = now(deps);
  const spec = checkScheduleRequest(deps.actions, request, names, at);
  const scheduleId = request.id ?? newId();
  const created = scheduleKind.make({ type: 'ScheduleCreated', data: { spec }, by: 'executor', correlationId: scheduleId }, at.toISOString());
  const snapshot = startSchedule(created);
  try {
    const r = await deps.store.append(
      scheduleStreamId(scheduleId),
      [{ eventId: newId(), type: created.type, data: created.data, metadata: { ...created.metadata, stateAfter: stateName(snapshot) } }],
      { expectedRevision: 'no_stream' },
    );
    return { created: true, schedule: describeSchedule(scheduleId, snapshot, r.nextExpectedRevision, at) };
  } catch (err) {
    if (!(err instanceof WrongExpectedRevisionError)) throw err;
  }
  const existing = await showSchedule(deps, scheduleId);
  if (existing.status === 'Deleted') throw new ScheduleIdConflictError(scheduleId, existing.deletedAt ?? 'an unknown time');
  if (!isDeepStrictEqual(existing.spec, spec)) throw new ScheduleIdConflictError(scheduleId);
  return { created: false, schedule: existing };
}

/** Change a schedule's definition: the fields given replace the current ones, and the whole is checked again. */
export async function updateSchedule(
  deps: ScheduleServiceDeps & { actions: Pick<ActionRegistry, 'get' | 'names'> },
  scheduleId: string,
  request: Omit<ScheduleRequest, 'id'>,
  names: ScheduleFieldNames,
): Promise<ScheduleView> {
  const at = now(deps);
  let unchanged = false;
  const r = await deps.schedules.dispatch(scheduleId, (s) => {
    if (!s) throw new NotFoundError('schedule', scheduleId);
    if (s.status === 'done') throw new ScheduleDeletedError(scheduleId, 'create a new one');
    const spec = checkScheduleRequest(deps.actions, request, names, at, s.context.spec);
    unchanged = isDeepStrictEqual(spec, s.context.spec);
    return unchanged ? undefined : { type: 'ScheduleUpdated', data: { spec }, by: 'executor', correlationId: scheduleId };
  });
  return describeSchedule(scheduleId, r.snapshot, r.revision, at);
}

export interface ScheduleChangeResult {
  scheduleId: string;
  /** False when it was so already (paused, active, deleted). */
  changed: boolean;
  status: ScheduleStatus;
  message: string;
}

type Change = 'pause' | 'resume' | 'delete';

/** Pause, resume or delete; asking for what already holds is not an error (changed: false). */
export async function changeSchedule(deps: ScheduleServiceDeps, scheduleId: string, change: Change, reason?: string): Promise<ScheduleChangeResult> {
  let settled: string | undefined;
  const r = await deps.schedules.dispatch(scheduleId, (s): Command<ScheduleEvent> | undefined => {
    if (!s) throw new NotFoundError('schedule', scheduleId);
    settled = undefined;
    // Deleting twice is a retry and settles; pausing or resuming what is deleted asks for something
    // that cannot happen, refused as trigger and update refuse it.
    if (s.status === 'done' && change !== 'delete') throw new ScheduleDeletedError(scheduleId, `nothing to ${change}`);
    if (s.status === 'done') settled = `schedule ${scheduleId} is already deleted`;
    else if (change === 'pause' && s.value === 'Paused') settled = `schedule ${scheduleId} is already paused (${s.context.pauseReason})`;
    else if (change === 'resume' && s.value === 'Active') settled = `schedule ${scheduleId} is not paused`;
    else if (change === 'pause') return { type: 'SchedulePaused', data: { reason: reason ?? 'paused' }, by: 'executor', correlationId: scheduleId };
    else if (change === 'resume') return { type: 'ScheduleResumed', data: {}, by: 'executor', correlationId: scheduleId };
    else return { type: 'ScheduleDeleted', data: { reason: reason ?? 'deleted' }, by: 'executor', correlationId: scheduleId };
    return undefined;
  });
  if (!r.appended && settled) return { scheduleId, changed: false, status: r.snapshot.value, message: settled };
  const done = { pause: 'paused: no tick fires until it is resumed', resume: 'resumed: ticks fire again from now on (those that fell while it was paused do not)', delete: 'deleted: no tick fires any more' }[change];
  return { scheduleId, changed: true, status: r.snapshot.value, message: `schedule ${scheduleId} ${done}` };
}

export interface TriggerResult {
  scheduleId: string;
  tickAt: string;
  target: FiredTarget;
  /** False when that target existed already. */
  started: boolean;
}

/** Fire the schedule now, outside its trigger: recorded as a manual tick, then its target is started (as a due tick's is). */
export async function triggerSchedule(deps: ScheduleServiceDeps, scheduleId: string): Promise<TriggerResult> {
  const tickAt = now(deps).toISOString();
  const r = await deps.schedules.dispatch(scheduleId, (s) => {
    if (!s) throw new NotFoundError('schedule', scheduleId);
    if (s.status === 'done') throw new ScheduleDeletedError(scheduleId, 'nothing to trigger');
    const target = targetOf(scheduleId, s.context.spec, { tickAt, manual: true });
    return { type: 'ScheduleTickFired', data: { tickAt, fireAt: tickAt, target, manual: true }, by: 'executor', eventId: tickEventId(scheduleId, tickAt, true), correlationId: scheduleId };
  });
  const tick = r.snapshot.context.recent.findLast((t) => t.manual && t.tickAt === tickAt);
  if (!tick) throw new BatonError(`schedule ${scheduleId}: the manual tick at ${tickAt} was not recorded`);
  const started = await startTarget(deps, scheduleId, r.snapshot.context.spec, tick);
  return { scheduleId, tickAt, target: tick.target, started };
}
