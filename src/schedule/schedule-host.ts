// The schedule host: runs inside every executor process, beside the workflow orchestrator,
// and fires each schedule's ticks when they are due (schedulePlan decides which; this host
// only keeps time and acts).
//
// It reads nothing by itself: the process's one follower (src/runtime/follow-actors.ts) folds
// every schedule event into the schedule runtime's cache, and the host arms one timer per
// schedule for its next tick. A tick is recorded first, as ScheduleTickFired appended at the
// revision it was decided on with an id derived from (schedule, tick): of several executors
// racing, one appends, the others' decisions no longer fit (the cursor moved past the tick) and
// they do nothing. Then its target is started with an id derived from the same pair, which is
// idempotent; every host makes sure the targets of a schedule's latest ticks exist
// (RECENT_FIRED), so a tick recorded by an executor killed before it started the target is
// started by another. A tick is never fired twice, and never lost while an executor runs.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { v5 as uuidv5 } from 'uuid';
import { schedulePlan, type ScheduleSnapshot } from '../../actors/schedule.machine.ts';
import { isTick } from '../../actors/schedule-ticks.ts';
import type { FiredTarget, ScheduleEvent } from '../../schemas/schedule-events.ts';
import { Backoff } from '../async/backoff.ts';
import { MAX_TIMER_MS } from '../async/sleep.ts';
import { createKick, kickWhenCaughtUp } from '../async/kick.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { Command } from '../runtime/actor-kind.ts';
import type { Change } from '../runtime/actor-runtime.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { ActorFollower } from '../runtime/follow-actors.ts';
import type { ScheduleRuntime } from '../runtime/schedule-kind.ts';
import type { WorkflowRuntime } from '../workflow/workflow-stream.ts';
import { cancelTarget, startTarget, targetFinished, targetOf, targetStreamId, type TargetDeps } from './targets.ts';

/** Namespace of tick event ids (uuid v5). Never change it: it is what makes a tick's event unique. */
const TICK_EVENT_NAMESPACE = '0e6a4c1d-93b2-4f5e-8d7a-c41b2e9f6a37';

/** The id of the event recording tick `tickAt` of a schedule (fired or skipped alike: one event per tick). */
export const tickEventId = (scheduleId: string, tickAt: string, manual = false) => uuidv5(`${scheduleId}/${manual ? 'manual/' : ''}${tickAt}`, TICK_EVENT_NAMESPACE);

export interface ScheduleActors {
  schedules: ScheduleRuntime;
  executions: ExecutionRuntime;
  workflows: WorkflowRuntime;
  follower: ActorFollower;
}

export interface ScheduleHostOptions {
  store: EventStore;
  actors: ScheduleActors;
  log: Logger;
  registry?: Registry;
  clock?: () => Date;
  /** Every schedule is looked at again this often even without an event (a safety net). Default 15 s; 0 turns it off. */
  sweepEveryMs?: number;
  /**
   * Whether retention archived (and removed) a stream: a recent tick whose target was archived ran
   * and finished, and its idempotency key went with it, so starting it again would run it twice.
   */
  archived?: (streamId: string) => Promise<boolean>;
}

export interface ScheduleHost {
  ready: Promise<void>;
  stop(): Promise<void>;
  /** Schedules it follows that are not deleted. */
  active(): number;
}

interface Followed {
  id: string;
  timer?: NodeJS.Timeout;
  running?: Promise<void>;
  again: boolean;
  backoff: Backoff;
}

export function startScheduleHost(o: ScheduleHostOptions): ScheduleHost {
  const { log } = o;
  const { schedules, follower } = o.actors;
  const clock = o.clock ?? (() => new Date());
  const deps: TargetDeps = { store: o.store, executions: o.actors.executions, workflows: o.actors.workflows };
  const followed = new Map<string, Followed>();
  /** Targets known to exist: not started again. Bounded; forgetting one costs an idempotent start. */
  const started = new Set<string>();
  const ac = new AbortController();
  let caughtUp = false;

  const metrics = o.registry && {
    fired: new Counter({ name: 'baton_schedule_ticks_fired_total', help: 'Schedule ticks this executor recorded as fired', registers: [o.registry] }),
    skipped: new Counter({ name: 'baton_schedule_ticks_skipped_total', help: 'Schedule ticks this executor recorded as skipped', labelNames: ['reason'], registers: [o.registry] }),
    lost: new Counter({ name: 'baton_schedule_tick_races_lost_total', help: 'Ticks another executor recorded first (this one then did nothing)', registers: [o.registry] }),
    active: new Gauge({ name: 'baton_schedules_active', help: 'Schedules followed (not deleted)', registers: [o.registry], collect() { this.set(followed.size); } }),
  };

  function onChange(change: Change<ScheduleSnapshot, ScheduleEvent>): void {
    let s = followed.get(change.id);
    if (change.after.status === 'done') {
      if (s) forget(s);
      return;
    }
    if (!s) {
      s = { id: change.id, again: false, backoff: new Backoff() };
      followed.set(change.id, s);
    }
    kick(s);
  }

  function forget(s: Followed): void {
    clearTimeout(s.timer);
    followed.delete(s.id);
  }

  function arm(s: Followed, nextAt: string | undefined): void {
    clearTimeout(s.timer);
    s.timer = undefined;
    if (nextAt === undefined || ac.signal.aborted) return;
    // A tick later than a timer holds is looked at again at the timer's longest wait.
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, Date.parse(nextAt) - clock().getTime()));
    s.timer = setTimeout(() => kick(s), wait);
    s.timer.unref();
  }

  /** Make sure the latest recorded ticks' targets exist (and what they replaced is cancelled). */
  async function ensureStarted(id: string, snapshot: ScheduleSnapshot): Promise<void> {
    const c = snapshot.context;
    for (const tick of c.recent) {
      if (started.has(tick.target.id)) continue;
      if (tick.target.kind !== c.spec.target.kind) {
        // Recorded before an update changed what the schedule runs: that target cannot be made from today's spec.
        log.warn({ scheduleId: id, tickAt: tick.tickAt, target: tick.target }, `schedule ${id}: the target of tick ${tick.tickAt} is a ${tick.target.kind}, the schedule now runs a ${c.spec.target.kind}; not starting it`);
        started.add(tick.target.id);
        continue;
      }
      if (await o.archived?.(targetStreamId(tick.target))) {
        // It ran and finished long enough ago for retention to take it: done, not missing.
        started.add(tick.target.id);
        continue;
      }
      if (tick.previous && c.spec.overlap === 'cancel-previous') await cancelTarget(deps, tick.previous, `replaced by the tick of ${tick.tickAt} of schedule ${id}`);
      const created = await startTarget(deps, id, c.spec, tick);
      if (created) log.info({ scheduleId: id, tickAt: tick.tickAt, target: tick.target, manual: tick.manual }, `schedule ${id} started ${tick.target.kind === 'action' ? 'execution' : 'workflow'} ${tick.target.id}`);
      if (started.size >= 100_000) started.clear();
      started.add(tick.target.id);
    }
  }

  /** Record one tick (or the missed ones before it) if it is still due; returns whether anything was due. */
  async function step(f: Followed): Promise<boolean> {
    const id = f.id;
    const { snapshot } = await schedules.load(id);
    await ensureStarted(id, snapshot);
    const plan = schedulePlan(id, snapshot, clock());
    if (plan.skip) {
      const skip = plan.skip;
      const r = await schedules.dispatch(id, (s) =>
        s && stillDue(s, skip.tickAt) ? { type: 'ScheduleTickSkipped', data: { ...skip, reason: 'missed' }, by: 'executor', eventId: tickEventId(id, skip.tickAt), correlationId: id } : undefined,
      );
      if (r.appended) {
        metrics?.skipped.inc({ reason: 'missed' }, skip.count);
        log.warn({ scheduleId: id, through: skip.tickAt, count: skip.count }, `schedule ${id}: ${skip.count} missed tick(s) skipped (catch-up policy)`);
      } else metrics?.lost.inc();
      return true;
    }
    const tick = plan.fire[0];
    if (!tick) {
      arm(f, plan.nextAt);
      return false;
    }
    const c = snapshot.context;
    const previous = c.recent[c.recent.length - 1]?.target;
    const previousRuns = previous !== undefined && c.spec.overlap !== 'allow' && !(await targetFinished(deps, previous));
    let command: Command<ScheduleEvent>;
    if (previousRuns && c.spec.overlap === 'skip') {
      command = { type: 'ScheduleTickSkipped', data: { tickAt: tick.tickAt, count: 1, reason: 'overlap' }, by: 'executor', eventId: tickEventId(id, tick.tickAt), correlationId: id };
    } else {
      const target: FiredTarget = targetOf(id, c.spec, { tickAt: tick.tickAt, manual: false });
      command = {
        type: 'ScheduleTickFired',
        data: { ...tick, target, manual: false, ...(previousRuns && previous && { previous }) },
        by: 'executor',
        eventId: tickEventId(id, tick.tickAt),
        correlationId: id,
      };
    }
    const r = await schedules.dispatch(id, (s) => (s && stillDue(s, tick.tickAt) ? command : undefined));
    if (!r.appended) {
      metrics?.lost.inc();
      return true;
    }
    if (command.type === 'ScheduleTickSkipped') {
      metrics?.skipped.inc({ reason: 'overlap' });
      log.info({ scheduleId: id, tickAt: tick.tickAt, previous }, `schedule ${id}: tick ${tick.tickAt} skipped, the previous run has not finished (overlap policy skip)`);
    } else {
      metrics?.fired.inc();
      await ensureStarted(id, r.snapshot);
    }
    return true;
  }

  const kick = createKick<Followed>({
    signal: ac.signal,
    active: (s) => caughtUp && followed.has(s.id),
    // Bounded: a plan covers at most 10,000 missed ticks, skipped with one event.
    async round(s) {
      for (let n = 0; n < 10_000 && !ac.signal.aborted; n++) if (!(await step(s))) break;
    },
    failed: (s, err, retryInMs) => log.error({ scheduleId: s.id, err, retryInMs }, 'firing a schedule’s tick failed; will try again'),
  });

  const unsubscribe = schedules.onChange(onChange);
  const kicking = kickWhenCaughtUp({
    caughtUp: follower.ready,
    followed,
    kick,
    sweepEveryMs: o.sweepEveryMs ?? 15_000,
    onCaughtUp() {
      caughtUp = true;
      log.info({ schedules: followed.size }, 'schedule host caught up');
    },
  });

  return {
    ready: kicking.ready,
    active: () => followed.size,
    async stop() {
      ac.abort();
      unsubscribe();
      for (const s of followed.values()) clearTimeout(s.timer);
      await kicking.stop();
    },
  };
}

/** Is the tick still to be recorded on this snapshot? Another executor may have recorded it, or an update moved the grid. */
const stillDue = (s: ScheduleSnapshot, tickAt: string) => s.value === 'Active' && Date.parse(tickAt) > Date.parse(s.context.cursor) && isTick(s.context.spec, s.context.anchorAt, tickAt);
