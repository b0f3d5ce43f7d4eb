// The schedule event catalog: one stream per schedule (`schedule-<id>`). Its definition
// (ScheduleSpec) is created and updated by people (CLI, GraphQL); its ticks are recorded by
// the executors' schedule hosts, one event per tick they fired or skipped, each appended at
// the revision it was decided on, so a tick is recorded once however many executors race.
import { z } from 'zod';
import { dateTime, jsonValue, text } from '../src/input/schemas.ts';
import { EventMetadata, ExecutorRef, Namespace } from './events.ts';
import { WorkflowDefinition } from './workflow.ts';
import { WORKFLOW_ID_MAX_LENGTH, WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE } from './workflow-id.ts';

/** A schedule's id: the same rule as a workflow id (letters, digits, . _ : -). */
export const ScheduleId = z.string().min(1).max(WORKFLOW_ID_MAX_LENGTH).regex(WORKFLOW_ID_PATTERN, WORKFLOW_ID_RULE);

export const SCHEDULE_LIMITS = {
  cronLength: 200,
  timezoneLength: 100,
  /** Intervals from 1 s to 366 days. */
  minEveryMs: 1_000,
  maxEveryMs: 366 * 24 * 3_600_000,
  /** Jitter up to 1 hour. */
  maxJitterMs: 3_600_000,
  /** Missed ticks run after downtime, at most. */
  maxCatchUp: 1_000,
} as const;

export const Trigger = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('cron'), cron: text().min(1).max(SCHEDULE_LIMITS.cronLength), timezone: text().min(1).max(SCHEDULE_LIMITS.timezoneLength) }),
  z.strictObject({ kind: z.literal('every'), everyMs: z.number().int().min(SCHEDULE_LIMITS.minEveryMs).max(SCHEDULE_LIMITS.maxEveryMs) }),
]);
export type Trigger = z.infer<typeof Trigger>;

export const ScheduleTarget = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('action'),
    action: text().min(1).max(200),
    input: jsonValue(),
    maxAttempts: z.number().int().min(1).max(1000).optional(),
    priority: z.number().int().min(-2_147_483_648).max(2_147_483_647).optional(),
  }),
  z.strictObject({ kind: z.literal('workflow'), definition: WorkflowDefinition }),
]);
export type ScheduleTarget = z.infer<typeof ScheduleTarget>;

/** skip: no new run while the previous one is unfinished; allow: run anyway; cancel-previous: cancel it, then run. */
export const OverlapPolicy = z.enum(['skip', 'allow', 'cancel-previous']);
export type OverlapPolicy = z.infer<typeof OverlapPolicy>;

export const ScheduleSpec = z.strictObject({
  trigger: Trigger,
  target: ScheduleTarget,
  /** Each tick fires up to this much later (the same delay for a tick on every executor). */
  jitterMs: z.number().int().min(0).max(SCHEDULE_LIMITS.maxJitterMs),
  overlap: OverlapPolicy,
  /** After downtime: how many of the missed ticks still run (the newest ones); 0 skips them all. */
  catchUp: z.number().int().min(0).max(SCHEDULE_LIMITS.maxCatchUp),
  /** No tick before this time (inclusive). */
  startAt: dateTime().optional(),
  /** No tick at or after this time. */
  endAt: dateTime().optional(),
  /** The namespace its ticks' executions live in; absent: `default`. */
  namespace: Namespace.optional(),
});
export type ScheduleSpec = z.infer<typeof ScheduleSpec>;

const event = <T extends string, D extends z.ZodType>(type: T, data: D) =>
  z.object({ type: z.literal(type), data, metadata: EventMetadata.extend({ by: ExecutorRef }) });

/** What a fired tick started: an execution or a workflow, by the id derived from (schedule, tick). */
export const FiredTarget = z.strictObject({ kind: z.enum(['action', 'workflow']), id: text().min(1).max(200) });
export type FiredTarget = z.infer<typeof FiredTarget>;

export const ScheduleCreated = event('ScheduleCreated', z.object({ spec: ScheduleSpec }));
export const ScheduleUpdated = event('ScheduleUpdated', z.object({ spec: ScheduleSpec }));
export const SchedulePaused = event('SchedulePaused', z.object({ reason: text().min(1).max(1_000) }));
export const ScheduleResumed = event('ScheduleResumed', z.object({}));
export const ScheduleDeleted = event('ScheduleDeleted', z.object({ reason: text().min(1).max(1_000) }));
/** One tick fired: `tickAt` is its time by the trigger (a manual trigger's: when it was asked for); `fireAt` with its jitter. */
export const ScheduleTickFired = event(
  'ScheduleTickFired',
  z.object({ tickAt: dateTime(), fireAt: dateTime(), target: FiredTarget, manual: z.boolean(), previous: FiredTarget.optional() }),
);
/** Ticks up to `tickAt` that did not run: `count` of them, missed during downtime or skipped for overlap. */
export const ScheduleTickSkipped = event(
  'ScheduleTickSkipped',
  z.object({ tickAt: dateTime(), count: z.number().int().min(1).max(1_000_000), reason: z.enum(['missed', 'overlap']) }),
);

export const ScheduleEvent = z.discriminatedUnion('type', [
  ScheduleCreated,
  ScheduleUpdated,
  SchedulePaused,
  ScheduleResumed,
  ScheduleDeleted,
  ScheduleTickFired,
  ScheduleTickSkipped,
]);
export type ScheduleEvent = z.infer<typeof ScheduleEvent>;
export type ScheduleEventOf<T extends ScheduleEvent['type']> = Extract<ScheduleEvent, { type: T }>;
export type ScheduleEventType = ScheduleEvent['type'];

export const SCHEDULE_STREAM_PREFIX = 'schedule-';
export const scheduleStreamId = (scheduleId: string) => `${SCHEDULE_STREAM_PREFIX}${scheduleId}`;
export const scheduleIdOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(SCHEDULE_STREAM_PREFIX) && streamId.length > SCHEDULE_STREAM_PREFIX.length ? streamId.slice(SCHEDULE_STREAM_PREFIX.length) : undefined;
