// Schedules over GraphQL: `schedule` folds the schedule's stream (never behind), `schedules`
// pages through the read model (projections/schedules.ts) by opaque, checked cursors
// (schedule-cursor.ts); the mutations go through the same service and the same checks as
// `baton schedule` (src/schedule/), so every refusal names the argument at fault
// (`timezone: unknown time zone …`) and nothing is stored.
import { namespaceOr } from '../input/namespace.ts';
import { ScheduleId } from '../../schemas/schedule-events.ts';
import { NotFoundError } from '../errors.ts';
import { createScheduleRuntime } from '../runtime/schedule-kind.ts';
import { findSchedule } from '../schedule/schedule-queries.ts';
import { API_SCHEDULE_NAMES, type ScheduleRequest } from '../schedule/schedule-request.ts';
import { ScheduleDeletedError, ScheduleIdConflictError, changeSchedule, createSchedule, showSchedule, triggerSchedule, updateSchedule, type ScheduleServiceDeps, type ScheduleView } from '../schedule/service.ts';
import { ScheduleTransitionError } from '../runtime/schedule-kind.ts';
import { createWorkflowRuntime } from '../workflow/workflow-stream.ts';
import { MAX_PAGE_SIZE, intInRange, textArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { notOurCursor } from './cursor.ts';
import { ApiError, badInput, knownFor } from './errors.ts';
import { jsonField } from './response-budget.ts';
import { encodeScheduleCursor, listSchedulesAfter, parseScheduleCursor } from './schedule-cursor.ts';

const MAX_REASON_LENGTH = 1_000;

function depsOf(ctx: ApiContext): ScheduleServiceDeps {
  if (!ctx.store) throw new ApiError('NOT_CONFIGURED', 'schedules are kept in the event store, and this API server was started without one');
  return { store: ctx.store, schedules: createScheduleRuntime(ctx.store), executions: ctx.runtime, workflows: createWorkflowRuntime(ctx.store) };
}

function scheduleIdArg(value: string, name: string): string {
  const r = ScheduleId.safeParse(value);
  if (!r.success) throw badInput(name, `must be a schedule id: ${r.error.issues[0]!.message}`);
  return value;
}

/** The service's typed refusals as the API's codes. */
async function refusing<T>(ctx: ApiContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await knownFor(ctx, fn);
  } catch (err) {
    if (err instanceof ScheduleIdConflictError) throw new ApiError('IDEMPOTENCY_CONFLICT', err.message, 'id', { scheduleId: err.scheduleId });
    if (err instanceof ScheduleDeletedError || err instanceof ScheduleTransitionError) throw new ApiError('CONFLICT', err.message);
    throw err;
  }
}

type DefinitionArgs = { [K in Exclude<keyof ScheduleRequest, 'id'>]?: ScheduleRequest[K] | null };

const requestOf = (a: DefinitionArgs): Omit<ScheduleRequest, 'id'> =>
  Object.fromEntries(Object.entries(a).filter(([k, v]) => v !== null && v !== undefined && k !== 'id')) as Omit<ScheduleRequest, 'id'>;

/**
 * From the read model, whose row is the machine's state after the last projected event: a
 * schedule's stream grows by one event per tick, so a request never folds a long one. A schedule
 * not projected yet (just created) is folded from its stream, which is then short.
 */
async function schedule(_: unknown, a: { id: string }, ctx: ApiContext) {
  const id = scheduleIdArg(a.id, 'id');
  const projected = await findSchedule(ctx.pool, id, new Date());
  if (projected) return projected;
  try {
    return await showSchedule(depsOf(ctx), id);
  } catch (err) {
    if (err instanceof NotFoundError) return null;
    throw err;
  }
}

/** The schedule id of an `after` cursor; BAD_USER_INPUT for anything this API did not hand out. */
function scheduleCursorArg(value: string): string {
  const id = parseScheduleCursor(value);
  if (id === undefined) throw notOurCursor('schedule');
  return id;
}

async function schedules(_: unknown, a: { status?: 'Active' | 'Paused' | 'Deleted' | null; includeDeleted?: boolean | null; first: number; after?: string | null }, ctx: ApiContext) {
  const first = intInRange(a.first, 'first', 1, MAX_PAGE_SIZE);
  const after = a.after == null ? undefined : scheduleCursorArg(a.after);
  const page = await listSchedulesAfter(ctx.pool, { first, ...(a.status && { status: a.status }), includeDeleted: a.includeDeleted ?? false, ...(after !== undefined && { after }) }, new Date());
  if (page === 'unknownAfter') throw badInput('after', `the cursor's schedule "${after}" is not in the read model (pass pageInfo.endCursor of the previous page)`);
  const edges = page.schedules.map((node) => ({ cursor: encodeScheduleCursor(node.scheduleId), node }));
  return { edges, pageInfo: { hasNextPage: page.hasNextPage, endCursor: edges.at(-1)?.cursor ?? null } };
}

async function createScheduleResolver(_: unknown, a: DefinitionArgs & { id?: string | null }, ctx: ApiContext) {
  const r = await refusing(ctx, () => createSchedule({ ...depsOf(ctx), actions: ctx.actions }, { ...requestOf(a), ...(a.id != null && { id: a.id }) }, API_SCHEDULE_NAMES));
  ctx.log.info({ scheduleId: r.schedule.scheduleId, created: r.created }, 'schedule created');
  return r;
}

async function updateScheduleResolver(_: unknown, a: DefinitionArgs & { id: string }, ctx: ApiContext) {
  const id = scheduleIdArg(a.id, 'id');
  return refusing(ctx, () => updateSchedule({ ...depsOf(ctx), actions: ctx.actions }, id, requestOf(a), API_SCHEDULE_NAMES));
}

const change = (kind: 'pause' | 'resume' | 'delete') => async (_: unknown, a: { id: string; reason?: string | null }, ctx: ApiContext) => {
  const id = scheduleIdArg(a.id, 'id');
  const reason = a.reason == null ? undefined : textArg(a.reason, 'reason', MAX_REASON_LENGTH);
  const r = await refusing(ctx, () => changeSchedule(depsOf(ctx), id, kind, reason));
  ctx.log.info({ scheduleId: id, changed: r.changed }, r.message);
  return r;
};

async function triggerScheduleResolver(_: unknown, a: { id: string }, ctx: ApiContext) {
  const id = scheduleIdArg(a.id, 'id');
  const r = await refusing(ctx, () => triggerSchedule(depsOf(ctx), id));
  return { scheduleId: r.scheduleId, tickAt: r.tickAt, targetKind: r.target.kind, targetId: r.target.id, started: r.started };
}

export const scheduleResolvers = {
  Query: { schedule, schedules },
  Mutation: {
    createSchedule: createScheduleResolver,
    updateSchedule: updateScheduleResolver,
    pauseSchedule: change('pause'),
    resumeSchedule: change('resume'),
    deleteSchedule: change('delete'),
    triggerSchedule: triggerScheduleResolver,
  },
  Schedule: {
    id: (v: ScheduleView) => v.scheduleId,
    triggerKind: (v: ScheduleView) => v.spec.trigger.kind,
    namespace: (v: ScheduleView) => namespaceOr(v.spec.namespace),
    cron: (v: ScheduleView) => (v.spec.trigger.kind === 'cron' ? v.spec.trigger.cron : null),
    timezone: (v: ScheduleView) => (v.spec.trigger.kind === 'cron' ? v.spec.trigger.timezone : null),
    everyMs: (v: ScheduleView) => (v.spec.trigger.kind === 'every' ? v.spec.trigger.everyMs : null),
    targetKind: (v: ScheduleView) => v.spec.target.kind,
    action: (v: ScheduleView) => (v.spec.target.kind === 'action' ? v.spec.target.action : null),
    input: jsonField((v: ScheduleView) => (v.spec.target.kind === 'action' ? v.spec.target.input : null)),
    workflow: jsonField((v: ScheduleView) => (v.spec.target.kind === 'workflow' ? v.spec.target.definition : null)),
    jitterMs: (v: ScheduleView) => v.spec.jitterMs,
    overlap: (v: ScheduleView) => v.spec.overlap,
    catchUp: (v: ScheduleView) => v.spec.catchUp,
    startAt: (v: ScheduleView) => v.spec.startAt ?? null,
    endAt: (v: ScheduleView) => v.spec.endAt ?? null,
    recentTicks: (v: ScheduleView) => v.recent.map((t) => ({ tickAt: t.tickAt, fireAt: t.fireAt, manual: t.manual, targetKind: t.target.kind, targetId: t.target.id })),
    revision: (v: ScheduleView) => Number(v.revision),
  },
};
