// The schedule machine, pure: tick math (cron with seconds, time zones across DST, intervals,
// start and end dates, jitter), every generated path of the machine (no tick recorded twice,
// none before its time, nothing after deletion, folds match), the plan (due, missed, catch-up),
// and replay of recorded histories with no divergence.
import { describe, expect, it } from 'vitest';
import { decideSchedule, foldSchedule, nextFireTimes, schedulePlan, startSchedule, MISSED_AFTER_MS, type ScheduleSnapshot } from '../../actors/schedule.machine.ts';
import { cronProblem, isTick, jitterOf, nextTickAfter, ticksAfter, timezoneProblem } from '../../actors/schedule-ticks.ts';
import type { ScheduleEvent } from '../../schemas/schedule-events.ts';
import { at, ev, generateSchedulePaths, spec } from '../support/schedule-paths.ts';

const iso = (ms: number) => new Date(ms).toISOString();
const cron = (expr: string, timezone = 'UTC') => spec({ trigger: { kind: 'cron', cron: expr, timezone } });

describe('schedule ticks', () => {
  it('reads 5-field and 6-field cron expressions', () => {
    const from = Date.parse('2026-03-01T00:00:00Z');
    expect(ticksAfter(cron('*/15 * * * *'), at(0), from, 3).map(iso)).toEqual(['2026-03-01T00:15:00.000Z', '2026-03-01T00:30:00.000Z', '2026-03-01T00:45:00.000Z']);
    expect(ticksAfter(cron('*/20 * * * * *'), at(0), from, 2).map(iso)).toEqual(['2026-03-01T00:00:20.000Z', '2026-03-01T00:00:40.000Z']);
  });

  it('keeps local time across DST in the schedule’s zone: a skipped 02:30 fires at 03:00, a repeated 01:30 once', () => {
    const berlin = cron('30 2 * * *', 'Europe/Berlin');
    expect(ticksAfter(berlin, at(0), Date.parse('2026-03-28T00:00:00Z'), 3).map(iso)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    const ny = cron('30 1 * * *', 'America/New_York');
    const fallBack = ticksAfter(ny, at(0), Date.parse('2026-11-01T00:00:00Z'), 2).map(iso);
    expect(fallBack).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
  });

  it('ticks an interval from its anchor, within start (inclusive) and end (exclusive) dates', () => {
    const s = spec({ trigger: { kind: 'every', everyMs: 30_000 }, startAt: at(100), endAt: at(190) });
    expect(ticksAfter(s, at(100), Date.parse(at(0)), 10).map(iso)).toEqual([at(100), at(130), at(160)]);
    expect(isTick(s, at(100), at(130))).toBe(true);
    expect(isTick(s, at(100), at(131))).toBe(false);
    expect(isTick(s, at(100), at(190))).toBe(false);
    expect(nextTickAfter(s, at(100), Date.parse(at(160)))).toBeUndefined();
  });

  it('has no tick past year 9999, the last year of every date Baton takes and gives', () => {
    const s = spec({ trigger: { kind: 'every', everyMs: 366 * 86_400_000 }, startAt: '9999-12-31T23:59:59.000Z' });
    expect(ticksAfter(s, '9999-12-31T23:59:59.000Z', Date.parse('9999-01-01T00:00:00Z'), 5).map(iso)).toEqual(['9999-12-31T23:59:59.000Z']);
    // As GraphQL's nextFireTimes and `baton schedule show` give them: the last one, then none (they printed +010000-…).
    const snapshot = startSchedule(ev.created(s, { at: '9999-06-01T00:00:00.000Z' }));
    expect(nextFireTimes('s-far', snapshot, new Date('9999-06-01T00:00:00Z'), 5)).toEqual(['9999-12-31T23:59:59.000Z']);
  });

  it('jitters each tick the same way everywhere, within its bound', () => {
    const tick = Date.parse(at(60));
    expect(jitterOf('s1', tick, 10_000)).toBe(jitterOf('s1', tick, 10_000));
    const values = Array.from({ length: 200 }, (_, i) => jitterOf('s1', tick + i * 60_000, 10_000));
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...values)).toBeLessThan(10_000);
    expect(new Set(values).size).toBeGreaterThan(100);
    expect(jitterOf('s1', tick, 0)).toBe(0);
  });

  it('names what is wrong with a cron expression or a time zone', () => {
    expect(cronProblem('61 * * * *')).toMatch(/invalid cron expression: .*minute/);
    expect(cronProblem('* * * *')).toMatch(/invalid cron expression/);
    expect(cronProblem('* * * * * * *')).toMatch(/invalid cron expression/);
    expect(cronProblem('0 9 * * mon-fri')).toBeUndefined();
    expect(timezoneProblem('Mars/Olympus')).toMatch(/unknown time zone "Mars\/Olympus"/);
    expect(timezoneProblem('Europe/Berlin')).toBeUndefined();
  });
});

describe('schedule machine: generated paths', () => {
  const paths = generateSchedulePaths();

  it('reaches every state, through enough paths to mean something', () => {
    expect(new Set(paths.map((p) => p.final.value))).toEqual(new Set(['Active', 'Paused', 'Deleted']));
    expect(paths.length).toBeGreaterThan(50);
  });

  it('never records a scheduled tick twice, nor out of order, nor before its time', () => {
    for (const { events } of paths) {
      const ticks = events.flatMap((e) => ((e.type === 'ScheduleTickFired' && !e.data.manual) || e.type === 'ScheduleTickSkipped' ? [Date.parse(e.data.tickAt)] : []));
      expect(new Set(ticks).size).toBe(ticks.length);
      expect([...ticks].sort((a, b) => a - b)).toEqual(ticks);
      for (const e of events) if (e.type === 'ScheduleTickFired') expect(Date.parse(e.data.fireAt)).toBeLessThanOrEqual(Date.parse(e.metadata.occurredAt));
    }
  });

  it('counts every fired and skipped tick, and folding a path gives the state it reached', () => {
    for (const { events, final } of paths) {
      const folded = foldSchedule(events);
      const { fired: _f, skipped: _s, recent: _r, ...reached } = final.context;
      expect(folded.value).toBe(final.value);
      expect(JSON.parse(JSON.stringify(folded.context))).toMatchObject(JSON.parse(JSON.stringify(reached)));
      expect(folded.context.fired).toBe(events.filter((e) => e.type === 'ScheduleTickFired').length);
      expect(folded.context.skipped).toBe(events.reduce((n, e) => n + (e.type === 'ScheduleTickSkipped' ? e.data.count : 0), 0));
    }
  });

  it('accepts nothing once deleted, and refuses with a reason that says why', () => {
    const deleted = paths.filter((p) => p.final.value === 'Deleted');
    expect(deleted.length).toBeGreaterThan(0);
    for (const { final } of deleted) {
      for (const e of [ev.resumed(), ev.fired(300), ev.updated(spec())] as ScheduleEvent[]) {
        const d = decideSchedule(final, e);
        expect(d).toEqual({ ok: false, reason: 'the schedule is deleted' });
      }
    }
    const s = startSchedule(ev.created());
    expect(decideSchedule(s, ev.fired(61))).toEqual({ ok: false, reason: `${at(61)} is not one of the schedule's ticks` });
    expect(decideSchedule(s, ev.fired(240, { at: at(239) }))).toMatchObject({ ok: false, reason: expect.stringMatching(/cannot fire before/) });
    const after = decideSchedule(s, ev.fired(60));
    expect(after.ok && decideSchedule(after.snapshot, ev.fired(60))).toEqual({ ok: false, reason: `tick ${at(60)} is not after ${at(60)}, the last tick dealt with` });
  });

  it('lets a tick that fell before a pause be recorded, but none after it', () => {
    let s: ScheduleSnapshot = startSchedule(ev.created());
    const step = (e: ScheduleEvent) => {
      const d = decideSchedule(s, e);
      if (!d.ok) throw new Error(d.reason);
      s = d.snapshot;
    };
    step(ev.paused({ at: at(130) }));
    expect(decideSchedule(s, ev.fired(180)).ok).toBe(false);
    step(ev.fired(120)); // decided just before the pause by some executor
    step(ev.fired(125, { manual: true })); // a manual trigger runs while paused
    step(ev.resumed({ at: at(400) }));
    expect(s.context.cursor).toBe(at(400));
    expect(decideSchedule(s, ev.fired(180)).ok).toBe(false);
    step(ev.fired(420));
    expect(s.context.fired).toBe(3);
  });
});

describe('schedule plan', () => {
  const now = (seconds: number) => new Date(Date.parse(at(seconds)));

  it('fires a tick once its time has come, and says when the next one is', () => {
    const s = startSchedule(ev.created());
    expect(schedulePlan('s', s, now(59))).toEqual({ fire: [], nextAt: at(60) });
    expect(schedulePlan('s', s, now(61))).toEqual({ fire: [{ tickAt: at(60), fireAt: at(60) }], nextAt: at(120) });
    expect(nextFireTimes('s', s, now(61), 3)).toEqual([at(120), at(180), at(240)]);
  });

  it('skips missed ticks after downtime, or runs the newest N of them', () => {
    const late = (MISSED_AFTER_MS / 1000) * 10;
    const skip = schedulePlan('s', startSchedule(ev.created()), now(late));
    // Ticks up to a minute late are on time; the older ones were missed.
    expect(skip.skip).toEqual({ tickAt: at(late - 120), count: late / 60 - 2 });
    expect(skip.fire.map((f) => f.tickAt)).toEqual([at(late - 60), at(late)]);
    const two = schedulePlan('s', startSchedule(ev.created(spec({ catchUp: 2 }))), now(late + 1));
    expect(two.skip).toEqual({ tickAt: at(late - 180), count: late / 60 - 3 });
    expect(two.fire.map((f) => f.tickAt)).toEqual([at(late - 120), at(late - 60), at(late)]);
  });

  it('counts a tick of a schedule that ticks more often than a minute as missed sooner: after the gap to its next tick, at least 5 s', () => {
    const everySecond = startSchedule(ev.created(spec({ trigger: { kind: 'every', everyMs: 1_000 } })));
    // 59 s down: ticks 1 to 59 are due; only those at most 5 s late are on time, not all 59.
    const seconds = schedulePlan('s', everySecond, new Date(Date.parse(at(0)) + 59_000));
    expect(seconds.fire.map((f) => f.tickAt)).toEqual([54, 55, 56, 57, 58, 59].map((n) => iso(Date.parse(at(0)) + n * 1_000)));
    expect(seconds.skip).toEqual({ tickAt: iso(Date.parse(at(0)) + 53_000), count: 53 });
    const everyTenCatchUpOne = startSchedule(ev.created(spec({ trigger: { kind: 'every', everyMs: 10_000 }, catchUp: 1 })));
    // 35 s down: ticks 10, 20, 30 due; 10 and 20 are later than the 10 s to their next tick; catch-up runs 20.
    const tens = schedulePlan('s', everyTenCatchUpOne, new Date(Date.parse(at(0)) + 35_000));
    expect(tens.fire.map((f) => f.tickAt)).toEqual([20, 30].map((n) => iso(Date.parse(at(0)) + n * 1_000)));
    expect(tens.skip).toEqual({ tickAt: iso(Date.parse(at(0)) + 10_000), count: 1 });
  });

  it('plans nothing while paused, and waits for each tick’s jitter', () => {
    const paused = decideSchedule(startSchedule(ev.created()), ev.paused());
    expect(paused.ok && schedulePlan('s', paused.snapshot, now(1_000))).toEqual({ fire: [] });
    const jittered = startSchedule(ev.created(spec({ jitterMs: 20_000 })));
    const j = jitterOf('s', Date.parse(at(60)), 20_000);
    expect(schedulePlan('s', jittered, new Date(Date.parse(at(60)) + j - 1)).fire).toEqual([]);
    expect(schedulePlan('s', jittered, new Date(Date.parse(at(60)) + j)).fire).toEqual([{ tickAt: at(60), fireAt: iso(Date.parse(at(60)) + j) }]);
  });

  it('stops at the end date', () => {
    const s = startSchedule(ev.created(spec({ endAt: at(150) })));
    expect(nextFireTimes('s', s, now(0), 5)).toEqual([at(60), at(120)]);
    const plan = schedulePlan('s', s, now(120));
    expect(plan.fire).toEqual([{ tickAt: at(60), fireAt: at(60) }, { tickAt: at(120), fireAt: at(120) }]);
    expect(plan.nextAt).toBeUndefined();
  });
});

describe('schedule replay', () => {
  it('replays each generated history with the state recorded at each event, without divergence', () => {
    for (const { events } of generateSchedulePaths()) {
      // Record as the runtime does: each event with the state the machine reached.
      let s: ScheduleSnapshot | undefined;
      const recorded = events.map((e) => {
        s = s === undefined ? startSchedule(e) : (decideSchedule(s, e) as { snapshot: ScheduleSnapshot }).snapshot;
        return { ...e, metadata: { ...e.metadata, stateAfter: String(s.value) } };
      });
      let r: ScheduleSnapshot | undefined;
      for (const e of recorded) {
        r = r === undefined ? startSchedule(e) : (() => {
          const d = decideSchedule(r!, e);
          if (!d.ok) throw new Error(d.reason);
          return d.snapshot;
        })();
        expect(String(r.value)).toBe(e.metadata.stateAfter);
      }
    }
  });
});
