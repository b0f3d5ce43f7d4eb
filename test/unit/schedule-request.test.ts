// The one check of a schedule request every front door uses: durations, triggers, targets,
// policies and dates, each problem named the way the door names it (CLI options or GraphQL
// arguments), and updates that keep what they do not change.
import { describe, expect, it } from 'vitest';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { InvalidInputError } from '../../src/input/errors.ts';
import { API_SCHEDULE_NAMES, CLI_SCHEDULE_NAMES, checkScheduleRequest, durationMs, type ScheduleRequest } from '../../src/schedule/schedule-request.ts';

const actions = createActionRegistry(builtinActions);
const now = new Date('2026-06-01T12:00:00Z');
const problems = (r: ScheduleRequest, names = API_SCHEDULE_NAMES) => {
  try {
    checkScheduleRequest(actions, r, names, now);
    return [];
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
};

describe('schedule requests', () => {
  it('reads durations', () => {
    expect(durationMs('30s')).toEqual({ ms: 30_000 });
    expect(durationMs('1h30m')).toEqual({ ms: 5_400_000 });
    expect(durationMs('500ms')).toEqual({ ms: 500 });
    expect(durationMs(1500)).toEqual({ ms: 1500 });
    expect(durationMs('soon')).toMatchObject({ problem: expect.stringMatching(/must be a duration/) });
    expect(durationMs('-5s')).toMatchObject({ problem: expect.any(String) });
  });

  it('names the same problems on both doors, by each door’s names', () => {
    const bad: ScheduleRequest = { cron: '* * *', timezone: 'Nowhere/Land', action: 'core.sleep', input: { ms: -1 }, catchUp: 1001, endAt: '2026-05-01T00:00:00Z' };
    const api = problems(bad);
    const cli = problems(bad, CLI_SCHEDULE_NAMES);
    expect(api.map((p) => p.split(':')[0])).toEqual(['timezone', 'cron', 'input.ms', 'catchUp', 'endAt']);
    expect(cli.map((p) => p.split(':')[0])).toEqual(['--tz', '--cron', '--input (at ms)', '--catch-up', '--end']);
    expect(cli.map((p) => p.slice(p.indexOf(':')))).toEqual(api.map((p) => p.slice(p.indexOf(':'))));
  });

  it('refuses a pinned action version (name@version) rather than dropping the pin', () => {
    expect(problems({ every: '1m', action: 'core.echo@2' })).toEqual(['action: a schedule cannot pin an action version (name@version) yet; its ticks run on the newest a live worker offers']);
    expect(problems({ every: '1m', action: 'core.echo@2' }, CLI_SCHEDULE_NAMES)).toEqual(['--action: a schedule cannot pin an action version (name@version) yet; its ticks run on the newest a live worker offers']);
  });

  it('refuses a start after the end, an interval with a time zone, and both kinds of target', () => {
    expect(problems({ every: '1m', action: 'core.noop', startAt: '2027-01-02T00:00:00Z', endAt: '2027-01-01T00:00:00Z' })).toEqual(['endAt: must be after startAt (2027-01-02T00:00:00.000Z)']);
    expect(problems({ every: '1m', timezone: 'UTC', action: 'core.noop' })).toEqual(['timezone: applies to cron only; an interval has no time zone']);
    expect(problems({ every: '1m', action: 'core.noop', workflow: { steps: [{ id: 'a', action: 'core.noop' }] } })).toEqual(['workflow: give either action or workflow, not both']);
    expect(problems({ cron: '0 0 1 1 *', action: 'core.noop', endAt: '2026-12-01T00:00:00Z' })).toEqual(['cron: never fires before endAt 2026-12-01T00:00:00.000Z']);
  });

  it('refuses a jitter not shorter than the time between ticks (ticks fire in order: one held back holds back the rest)', () => {
    expect(problems({ every: '2s', jitter: '20s', action: 'core.noop' })).toEqual(['jitter: must be shorter than the time between ticks (2s), got 20s']);
    expect(problems({ every: '2s', jitter: '2s', action: 'core.noop' }, CLI_SCHEDULE_NAMES)).toEqual(['--jitter: must be shorter than the time between ticks (2s), got 2s']);
    expect(problems({ cron: '*/10 * * * * *', jitter: '10s', action: 'core.noop' })).toEqual(['jitter: must be shorter than the time between ticks (10s at the shortest), got 10s']);
    expect(problems({ cron: '* * * * *', jitter: '5s', action: 'core.noop' })).toEqual([]);
    expect(problems({ every: '2s', jitter: '1999ms', action: 'core.noop' })).toEqual([]);
  });

  it('makes a spec with defaults, and an update keeps what it does not name', () => {
    const spec = checkScheduleRequest(actions, { cron: '0  9 * *  mon-fri', timezone: 'Europe/Berlin', action: 'core.echo', input: { a: 1 } }, API_SCHEDULE_NAMES, now);
    expect(spec).toEqual({ trigger: { kind: 'cron', cron: '0 9 * * mon-fri', timezone: 'Europe/Berlin' }, target: { kind: 'action', action: 'core.echo', input: { a: 1 } }, jitterMs: 0, overlap: 'skip', catchUp: 0 });
    const updated = checkScheduleRequest(actions, { input: { a: 2 }, jitter: '10s', timezone: 'UTC' }, API_SCHEDULE_NAMES, now, spec);
    expect(updated).toEqual({ ...spec, trigger: { ...spec.trigger, timezone: 'UTC' }, target: { ...spec.target, input: { a: 2 } }, jitterMs: 10_000 });
    expect(checkScheduleRequest(actions, { every: '5m' }, API_SCHEDULE_NAMES, now, spec).trigger).toEqual({ kind: 'every', everyMs: 300_000 });
  });
});
