// What `baton schedule …` does (its options are defined in schedule-commands.ts).
import { createActionRegistry } from '../../actions/index.ts';
import { InvalidInputError } from '../../input/errors.ts';
import { CLI_SCHEDULE_NAMES, human, type ScheduleRequest } from '../../schedule/schedule-request.ts';
import { changeSchedule, createSchedule, showSchedule, triggerSchedule, updateSchedule, type ScheduleView } from '../../schedule/service.ts';
import { readDefinitionFile } from '../../workflow/definition-file.ts';
import { scheduleStreamId } from '../../../schemas/schedule-events.ts';
import { BatonError, NotFoundError } from '../../errors.ts';
import { encodeScheduleCursor, listSchedulesAfter, parseScheduleCursor } from '../../api/schedule-cursor.ts';
import { asScheduleEvent } from '../../runtime/schedule-kind.ts';
import { replaySchedule } from '../../schedule/schedule-replay.ts';
import type { JsonOptionValue } from '../arguments.ts';
import { type CliContext, readContext, withContext } from '../context.ts';
import { fields, table, toJson } from '../format.ts';
import { loadActions } from '../hosts.ts';

export interface DefinitionOptions {
  id?: string;
  cron?: string;
  tz?: string;
  every?: string;
  action?: string;
  input?: JsonOptionValue;
  maxAttempts?: number;
  priority?: number;
  workflow?: string;
  jitter?: string;
  overlap?: string;
  catchUp?: number;
  start?: string;
  end?: string;
  namespace?: string;
  actions?: string;
  json?: boolean;
}

async function requestOf(o: DefinitionOptions): Promise<ScheduleRequest> {
  return {
    ...(o.id !== undefined && { id: o.id }),
    ...(o.cron !== undefined && { cron: o.cron }),
    ...(o.tz !== undefined && { timezone: o.tz }),
    ...(o.every !== undefined && { every: o.every }),
    ...(o.action !== undefined && { action: o.action }),
    ...(o.input !== undefined && { input: o.input.json }),
    ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }),
    ...(o.priority !== undefined && { priority: o.priority }),
    ...(o.workflow !== undefined && { workflow: await readDefinitionFile(o.workflow) }),
    ...(o.jitter !== undefined && { jitter: o.jitter }),
    ...(o.overlap !== undefined && { overlap: o.overlap }),
    ...(o.catchUp !== undefined && { catchUp: o.catchUp }),
    ...(o.start !== undefined && { startAt: o.start }),
    ...(o.end !== undefined && { endAt: o.end }),
    ...(o.namespace !== undefined && { namespace: o.namespace }),
  };
}

const describeTrigger = (v: ScheduleView) => (v.spec.trigger.kind === 'cron' ? `cron '${v.spec.trigger.cron}' (${v.spec.trigger.timezone})` : `every ${human(v.spec.trigger.everyMs)}`);
const describeTarget = (v: ScheduleView) => (v.spec.target.kind === 'action' ? `action ${v.spec.target.action}` : `workflow ${v.spec.target.definition.name ?? `(${v.spec.target.definition.steps.length} steps)`}`);

function printView(v: ScheduleView): void {
  console.log(
    fields([
      ['schedule', v.scheduleId],
      ['status', v.status],
      ['trigger', describeTrigger(v)],
      ['target', describeTarget(v)],
      ['overlap', v.spec.overlap],
      ['catch-up', String(v.spec.catchUp)],
      ['jitter', v.spec.jitterMs ? `${v.spec.jitterMs} ms` : undefined],
      ['start', v.spec.startAt],
      ['end', v.spec.endAt],
      ['created', v.createdAt],
      ['paused', v.pausedAt && `${v.pausedAt} (${v.pauseReason})`],
      ['fired', String(v.fired)],
      ['skipped', String(v.skipped)],
      ['next', v.nextFireTimes.join(', ') || '-'],
    ]),
  );
  if (v.recent.length > 0) {
    console.log('');
    console.log(table(['TICK', 'FIRED', 'TARGET'], v.recent.map((t) => [t.manual ? `${t.tickAt} (manual)` : t.tickAt, t.fireAt, `${t.target.kind === 'action' ? 'execution' : 'workflow'} ${t.target.id}`])));
  }
}

/** A refusal, one problem per line with its option, and exit 1. */
function refused(err: unknown, json: boolean | undefined): void {
  if (!(err instanceof InvalidInputError)) throw err;
  if (json) console.log(toJson({ problems: err.problems.map(({ path, message }) => ({ path, message })) }));
  process.stderr.write(`baton: invalid schedule (nothing was written): ${err.describe()}\n`);
  process.exitCode = 1;
}

async function withActions<T>(o: DefinitionOptions, fn: (ctx: CliContext, actions: ReturnType<typeof createActionRegistry>) => Promise<T>): Promise<T> {
  return withContext(async (ctx) => fn(ctx, createActionRegistry(await loadActions(o.actions, ctx.config))));
}

export async function scheduleCreateCommand(o: DefinitionOptions): Promise<void> {
  const request = await requestOf(o);
  await withActions(o, async (ctx, actions) => {
    try {
      // As `baton submit` does: BATON_NAMESPACE when --namespace is not given.
      const r = await createSchedule({ ...ctx, executions: ctx.runtime, actions }, { ...request, namespace: request.namespace ?? ctx.config.namespace }, CLI_SCHEDULE_NAMES);
      if (o.json) console.log(toJson(r));
      else console.log(`${r.created ? 'created schedule' : 'already created (same id and definition):'} ${r.schedule.scheduleId} (${describeTrigger(r.schedule)}, ${describeTarget(r.schedule)}; next ${r.schedule.nextFireTimes[0] ?? '-'})`);
    } catch (err) {
      refused(err, o.json);
    }
  });
}

export async function scheduleUpdateCommand(id: string, o: DefinitionOptions): Promise<void> {
  const { id: _ignored, ...request } = await requestOf(o);
  await withActions(o, async (ctx, actions) => {
    try {
      const v = await updateSchedule({ ...ctx, executions: ctx.runtime, actions }, id, request, CLI_SCHEDULE_NAMES);
      if (o.json) console.log(toJson(v));
      else console.log(`updated schedule ${id} (${describeTrigger(v)}, ${describeTarget(v)}; next ${v.nextFireTimes[0] ?? '-'})`);
    } catch (err) {
      refused(err, o.json);
    }
  });
}

export async function scheduleShowCommand(id: string, o: { json?: boolean }): Promise<void> {
  await readContext(async (ctx) => {
    const v = await showSchedule({ ...ctx, executions: ctx.runtime }, id);
    if (o.json) console.log(toJson(v));
    else printView(v);
  });
}

/** The cursors are the GraphQL API's: its `endCursor` works here, and `nextAfter` as its `after`. */
function afterCursor(value: string): string {
  const id = parseScheduleCursor(value);
  if (id === undefined) throw new BatonError(`--after: "${value.slice(0, 40)}" is not a cursor from \`baton schedule list\` (pass the one a full page ends with)`);
  return id;
}

export async function scheduleListCommand(o: { status?: 'Active' | 'Paused' | 'Deleted'; all?: boolean; limit: number; after?: string; json?: boolean }): Promise<void> {
  const after = o.after === undefined ? undefined : afterCursor(o.after);
  await readContext(async ({ pool }) => {
    const page = await listSchedulesAfter(pool, { first: o.limit, ...(o.status && { status: o.status }), includeDeleted: o.all ?? false, ...(after !== undefined && { after }) }, new Date());
    if (page === 'unknownAfter') throw new BatonError(`--after: the cursor's schedule "${after}" is not in the read model (pass the cursor a full page ends with)`);
    const nextAfter = page.hasNextPage ? encodeScheduleCursor(page.schedules.at(-1)!.scheduleId) : null;
    if (o.json) {
      console.log(toJson({ schedules: page.schedules, nextAfter }));
      return;
    }
    if (page.schedules.length === 0) {
      console.log(after ? 'no more schedules' : 'no schedules');
      return;
    }
    console.log(table(['SCHEDULE', 'STATUS', 'TRIGGER', 'TARGET', 'FIRED', 'NEXT'], page.schedules.map((v) => [v.scheduleId, v.status, describeTrigger(v), describeTarget(v), String(v.fired), v.nextFireTimes[0] ?? '-'])));
    if (nextAfter) console.log(`\nmore: baton schedule list --limit ${o.limit} --after ${nextAfter}`);
  });
}

export async function scheduleChangeCommand(change: 'pause' | 'resume' | 'delete', id: string, o: { reason?: string; json?: boolean }): Promise<void> {
  await withContext(async (ctx) => {
    const r = await changeSchedule({ ...ctx, executions: ctx.runtime }, id, change, o.reason);
    if (o.json) console.log(toJson(r));
    else console.log(r.message);
  });
}

export async function scheduleTriggerCommand(id: string, o: { json?: boolean }): Promise<void> {
  await withContext(async (ctx) => {
    const r = await triggerSchedule({ ...ctx, executions: ctx.runtime }, id);
    if (o.json) console.log(toJson(r));
    else console.log(`schedule ${id} triggered at ${r.tickAt}: ${r.target.kind === 'action' ? 'execution' : 'workflow'} ${r.target.id}`);
  });
}

export async function scheduleReplayCommand(id: string, o: { json?: boolean }): Promise<void> {
  await readContext(async (ctx) => {
    const stored = await ctx.store.readStream(scheduleStreamId(id));
    if (stored.length === 0) throw new NotFoundError('schedule', id);
    const r = replaySchedule(stored.map(asScheduleEvent));
    if (o.json) console.log(toJson({ scheduleId: id, ...r }));
    else if (r.divergences.length === 0) console.log(`schedule ${id}: ${r.events} events replayed, no divergence (ends ${r.finalState})`);
    else for (const d of r.divergences) console.log(`schedule ${id} event ${d.revision} (${d.type}): recorded ${d.recorded ?? '-'}, replayed ${d.replayed}`);
    if (r.divergences.length > 0) process.exitCode = 1;
  });
}
