// A schedule as a person asks for it, whichever door it came through (`baton schedule
// create|update`, GraphQL createSchedule|updateSchedule, a library caller), checked the same
// way everywhere and made into a ScheduleSpec: every problem is found before anything is
// written, each named the way that door names its arguments (`--tz` on the CLI, `timezone` in
// GraphQL). Unknown time zones, cron expressions croner cannot read or that never fire,
// absurd dates and durations are refused with the field that holds them.
import { nextTickAfter, cronProblem, timezoneProblem } from '../../actors/schedule-ticks.ts';
import { OverlapPolicy, SCHEDULE_LIMITS, ScheduleId, type ScheduleSpec, type ScheduleTarget, type Trigger } from '../../schemas/schedule-events.ts';
import type { ActionRegistry } from '../actions/registry.ts';
import { InvalidActionInputError } from '../actions/action.ts';
import { InvalidInputError, pathIn, type InputProblem } from '../input/errors.ts';
import { dateTimeProblem, integerProblem, printable, textProblem } from '../input/rules.ts';
import { checkSubmission, type SubmissionNames } from '../runtime/submission.ts';
import { DEFAULT_NAMESPACE, namespaceProblem } from '../input/namespace.ts';
import { workflowProblems } from '../workflow/service.ts';
import { formatDuration } from '../config-values.ts';

/** What a person asks for. On update, a missing field keeps the schedule's current value. */
export interface ScheduleRequest {
  id?: string;
  cron?: string;
  /** With `cron`: an IANA time zone; default UTC. */
  timezone?: string;
  /** A fixed interval: `30s`, `5m`, `1h30m`, `2d`, `500ms`, or a number of milliseconds. */
  every?: string | number;
  action?: string;
  input?: unknown;
  maxAttempts?: number;
  priority?: number;
  /** A workflow definition (as `baton workflow submit` takes it). */
  workflow?: unknown;
  /** Like `every`; default 0. */
  jitter?: string | number;
  overlap?: string;
  catchUp?: number;
  startAt?: string;
  endAt?: string;
  /** Where its ticks' executions live (src/input/namespace.ts); default `default`. */
  namespace?: string;
}

export type ScheduleFieldNames = Record<keyof ScheduleRequest, string>;

export const API_SCHEDULE_NAMES: ScheduleFieldNames = {
  id: 'id', cron: 'cron', timezone: 'timezone', every: 'every', action: 'action', input: 'input', maxAttempts: 'maxAttempts', priority: 'priority',
  workflow: 'workflow', jitter: 'jitter', overlap: 'overlap', catchUp: 'catchUp', startAt: 'startAt', endAt: 'endAt', namespace: 'namespace',
};

export const CLI_SCHEDULE_NAMES: ScheduleFieldNames = {
  id: '--id', cron: '--cron', timezone: '--tz', every: '--every', action: '--action', input: '--input', maxAttempts: '--max-attempts', priority: '--priority',
  workflow: '--workflow', jitter: '--jitter', overlap: '--overlap', catchUp: '--catch-up', startAt: '--start', endAt: '--end', namespace: '--namespace',
};

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `30s`, `1h30m`, `500ms`, or a whole number of milliseconds: the milliseconds, or the problem. */
export function durationMs(value: string | number): { ms: number } | { problem: string } {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? { ms: value } : { problem: 'must be a whole number of milliseconds' };
  if (!/^(\d{1,9}(ms|s|m|h|d))+$/.test(value)) return { problem: `must be a duration such as 30s, 5m, 1h30m, 2d or 500ms, got "${printable(value, 40)}"` };
  let ms = 0;
  for (const [, n, unit] of value.matchAll(/(\d+)(ms|s|m|h|d)/g)) ms += Number(n) * UNIT_MS[unit!]!;
  return { ms };
}

/** A duration as a schedule's options write it: `2d`, `1h`, `90s`, `500ms`. */
export const human = (ms: number): string => (ms === 0 ? '0s' : ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : formatDuration(ms));

/** Whether the names are the CLI's options (`--action`), whose values the message shows as placeholders. */
const cliNames = (names: ScheduleFieldNames) => names.action.startsWith('--');

/** The schedule id a request names, or the problem with it. */
export function scheduleIdProblem(id: unknown): string | undefined {
  const r = ScheduleId.safeParse(id);
  return r.success ? undefined : r.error.issues[0]!.message;
}

/** The shortest time between two of the next ticks from `first` (20 of them: a cron's gaps vary); undefined: it fires once. */
function shortestGap(spec: ScheduleSpec, anchor: string, first: number): number | undefined {
  let shortest: number | undefined;
  for (let at = first, i = 0; i < 20; i++) {
    const next = nextTickAfter(spec, anchor, at);
    if (next === undefined) break;
    shortest = Math.min(shortest ?? Infinity, next - at);
    at = next;
  }
  return shortest;
}

/**
 * The spec a request makes (on top of `current` for an update), or InvalidInputError listing
 * every problem. `now` is when it is asked: end dates in the past and triggers that will never
 * fire again are refused.
 */
export function checkScheduleRequest(
  actions: Pick<ActionRegistry, 'get' | 'names'>,
  r: ScheduleRequest,
  names: ScheduleFieldNames,
  now: Date,
  current?: ScheduleSpec,
): ScheduleSpec {
  const problems: InputProblem[] = [];
  const problem = (field: keyof ScheduleRequest, message: string | undefined) => message !== undefined && problems.push({ path: names[field], message });

  if (r.id !== undefined) problem('id', scheduleIdProblem(r.id));

  // --- trigger
  let trigger: Trigger | undefined = current?.trigger;
  if (r.cron !== undefined && r.every !== undefined) problem('every', `give either ${names.cron} or ${names.every}, not both`);
  else if (r.cron !== undefined) {
    const timezone = r.timezone ?? (current?.trigger.kind === 'cron' ? current.trigger.timezone : 'UTC');
    const tzText = textProblem(timezone, { required: true, maxLength: SCHEDULE_LIMITS.timezoneLength });
    const tz = tzText ?? timezoneProblem(timezone);
    problem('timezone', tz);
    const cronText = textProblem(r.cron, { required: true, maxLength: SCHEDULE_LIMITS.cronLength });
    const cron = cronText ?? cronProblem(r.cron, tz ? 'UTC' : timezone);
    problem('cron', cron);
    if (!tz && !cron) trigger = { kind: 'cron', cron: r.cron.trim().replace(/\s+/g, ' '), timezone };
  } else if (r.every !== undefined) {
    if (r.timezone !== undefined) problem('timezone', `applies to ${names.cron} only; an interval has no time zone`);
    const d = durationMs(r.every);
    if ('problem' in d) problem('every', d.problem);
    else if (d.ms < SCHEDULE_LIMITS.minEveryMs || d.ms > SCHEDULE_LIMITS.maxEveryMs) problem('every', `must be from ${human(SCHEDULE_LIMITS.minEveryMs)} to ${human(SCHEDULE_LIMITS.maxEveryMs)}, got ${human(d.ms)}`);
    else trigger = { kind: 'every', everyMs: d.ms };
  } else if (r.timezone !== undefined) {
    if (current?.trigger.kind !== 'cron') problem('timezone', `applies to ${names.cron} only`);
    else {
      const tz = textProblem(r.timezone, { required: true, maxLength: SCHEDULE_LIMITS.timezoneLength }) ?? timezoneProblem(r.timezone);
      problem('timezone', tz);
      if (!tz) trigger = { ...current.trigger, timezone: r.timezone };
    }
  } else if (!current) problem('cron', cliNames(names) ? `a schedule needs ${names.cron} '<expression>' or ${names.every} <duration>` : `a schedule needs ${names.cron} (an expression) or ${names.every} (a duration)`);

  // --- target
  let target: ScheduleTarget | undefined = current?.target;
  // Schedules carry no tags of their own (yet): the name is only for the shape.
  const submissionNames: SubmissionNames = { action: names.action, input: names.input, idempotencyKey: names.id, maxAttempts: names.maxAttempts, priority: names.priority, tags: 'tags', actionVersion: names.action };
  if (r.action !== undefined && r.workflow !== undefined) problem('workflow', `give either ${names.action} or ${names.workflow}, not both`);
  else if (r.workflow !== undefined) {
    for (const f of ['input', 'maxAttempts', 'priority'] as const) if (r[f] !== undefined) problem(f, `applies to ${names.action} only (a workflow's steps carry their own)`);
    const checked = workflowProblems(r.workflow, actions);
    if (checked.ok) target = { kind: 'workflow', definition: checked.definition };
    else problems.push(...checked.problems.map((p) => ({ path: p.path ? `${names.workflow}.${p.path}` : names.workflow, message: p.message })));
  } else if (r.action !== undefined || (current?.target.kind === 'action' && (r.input !== undefined || r.maxAttempts !== undefined || r.priority !== undefined))) {
    const base = current?.target.kind === 'action' ? current.target : undefined;
    try {
      const s = checkSubmission(
        actions,
        {
          action: r.action ?? base!.action,
          input: r.input !== undefined ? r.input : (base?.input ?? null),
          ...((r.maxAttempts ?? base?.maxAttempts) !== undefined && { maxAttempts: r.maxAttempts ?? base?.maxAttempts }),
          ...((r.priority ?? base?.priority) !== undefined && { priority: r.priority ?? base?.priority }),
        },
        submissionNames,
      );
      // A schedule's target does not carry a version pin yet: refused rather than dropped.
      if (s.actionVersion !== undefined) problem('action', 'a schedule cannot pin an action version (name@version) yet; its ticks run on the newest a live worker offers');
      target = { kind: 'action', action: s.action, input: (s.input ?? null) as never, ...(s.maxAttempts !== undefined && { maxAttempts: s.maxAttempts }), ...(s.priority !== undefined && { priority: s.priority }) };
    } catch (err) {
      if (err instanceof InvalidInputError) problems.push(...err.problems);
      else if (err instanceof InvalidActionInputError) problems.push(...err.issues.map((i) => ({ path: pathIn(names.input, i.path.split('.').slice(1)), message: i.message })));
      else throw err;
    }
  } else if (r.input !== undefined || r.maxAttempts !== undefined || r.priority !== undefined) {
    problem('input', `applies to ${names.action} only`);
  } else if (!current) problem('action', cliNames(names) ? `a schedule needs ${names.action} <name> or ${names.workflow} <file>` : `a schedule needs ${names.action} (an action's name) or ${names.workflow} (a workflow definition)`);

  // --- policies and dates
  let jitterMs = current?.jitterMs ?? 0;
  if (r.jitter !== undefined) {
    const d = durationMs(r.jitter);
    if ('problem' in d) problem('jitter', d.problem);
    else if (d.ms > SCHEDULE_LIMITS.maxJitterMs) problem('jitter', `must be at most ${human(SCHEDULE_LIMITS.maxJitterMs)}, got ${human(d.ms)}`);
    else jitterMs = d.ms;
  }
  let overlap = current?.overlap ?? 'skip';
  if (r.overlap !== undefined) {
    const o = OverlapPolicy.safeParse(r.overlap);
    if (o.success) overlap = o.data;
    else problem('overlap', `must be one of ${OverlapPolicy.options.join(', ')}, got "${printable(String(r.overlap), 40)}"`);
  }
  let catchUp = current?.catchUp ?? 0;
  if (r.catchUp !== undefined) {
    const p = integerProblem(r.catchUp, 0, SCHEDULE_LIMITS.maxCatchUp);
    if (p) problem('catchUp', `${p}: how many missed ticks run after downtime (0 skips them)`);
    else catchUp = r.catchUp;
  }
  const date = (field: 'startAt' | 'endAt'): string | undefined => {
    const v = r[field];
    if (v === undefined) return current?.[field];
    const d = dateTimeProblem(v);
    if ('problem' in d) return void problem(field, d.problem);
    return d.iso;
  };
  const startAt = date('startAt');
  const endAt = date('endAt');
  if (endAt !== undefined && startAt !== undefined && Date.parse(endAt) <= Date.parse(startAt)) problem('endAt', `must be after ${names.startAt} (${startAt})`);
  else if (endAt !== undefined && r.endAt !== undefined && Date.parse(endAt) <= now.getTime()) problem('endAt', `is in the past (${endAt}): the schedule would never fire`);

  // `default` is recorded as no namespace, so a schedule made before namespaces compares equal.
  let namespace = current?.namespace;
  if (r.namespace !== undefined) {
    const p = namespaceProblem(r.namespace);
    if (p) problem('namespace', p);
    else namespace = r.namespace === DEFAULT_NAMESPACE ? undefined : r.namespace;
  }

  if (problems.length === 0 && trigger && target) {
    const spec: ScheduleSpec = { trigger, target, jitterMs, overlap, catchUp, ...(startAt !== undefined && { startAt }), ...(endAt !== undefined && { endAt }), ...(namespace !== undefined && { namespace }) };
    // A trigger that never fires from now on (`0 0 30 2 *`, or no tick before the end date).
    const anchor = spec.startAt !== undefined && trigger.kind === 'every' ? spec.startAt : now.toISOString();
    const first = nextTickAfter(spec, anchor, now.getTime());
    const gap = first === undefined ? undefined : shortestGap(spec, anchor, first);
    if (first === undefined) {
      problems.push({ path: trigger.kind === 'cron' ? names.cron : names.endAt, message: `never fires${endAt ? ` before ${names.endAt} ${endAt}` : ''}` });
    } else if (gap !== undefined && jitterMs >= gap) {
      // Ticks are recorded in order: a tick delayed past the next one's time holds that one back,
      // and every later tick fires late (its recorded fireAt no longer when it ran).
      problems.push({ path: names.jitter, message: `must be shorter than the time between ticks (${human(gap)}${trigger.kind === 'cron' ? ' at the shortest' : ''}), got ${human(jitterMs)}` });
    } else return spec;
  }
  throw new InvalidInputError(problems.length > 0 ? problems : [{ path: names.cron, message: 'incomplete schedule' }]);
}
