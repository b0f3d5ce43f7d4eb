// Schedules against the real event store: three schedule hosts in one process (each with its
// own runtimes and follower, as three executors have) race on every tick of an interval
// schedule, and each tick is recorded once and starts exactly one execution; a tick recorded by
// an executor that died before starting its target is started by the next host; manual
// triggers, pause and the service's refusals.
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { SCHEDULE_STREAM_PREFIX, scheduleStreamId } from '../../schemas/schedule-events.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { InvalidInputError } from '../../src/input/errors.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { asScheduleEvent, createScheduleRuntime } from '../../src/runtime/schedule-kind.ts';
import { startScheduleHost, tickEventId, type ScheduleHost } from '../../src/schedule/schedule-host.ts';
import { API_SCHEDULE_NAMES } from '../../src/schedule/schedule-request.ts';
import { changeSchedule, createSchedule, showSchedule, triggerSchedule, type ScheduleServiceDeps } from '../../src/schedule/service.ts';
import { targetOf, tickKey } from '../../src/schedule/targets.ts';
import { replaySchedule } from '../../src/schedule/schedule-replay.ts';
import { createWorkflowRuntime, loadWorkflow } from '../../src/workflow/workflow-stream.ts';
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { archivedStream, recordArchived } from '../../src/retention/store-side.ts';
import { useTestStore } from '../support/test-store.ts';
import { allEvents, eventually } from '../support/workflow-cluster.ts';

const actions = createActionRegistry(builtinActions);

describe('schedules', () => {
  const t = useTestStore();
  let deps: ScheduleServiceDeps;
  const hosts: { host: ScheduleHost; stopFollower: () => Promise<void> }[] = [];

  function startHost(o: { archived?: (streamId: string) => Promise<boolean> } = {}): ScheduleHost {
    const schedules = createScheduleRuntime(t.store);
    const executions = createExecutionRuntime(t.store);
    const workflows = createWorkflowRuntime(t.store);
    const log = silentLogger();
    const follower = followActors({ store: t.store, runtimes: [schedules, executions.actors, workflows], log, who: 'test' });
    const host = startScheduleHost({ store: t.store, actors: { schedules, executions, workflows, follower }, log, sweepEveryMs: 1_000, ...o });
    hosts.push({ host, stopFollower: () => follower.stop() });
    return host;
  }

  async function stopHosts(): Promise<void> {
    for (const h of hosts.splice(0)) {
      await h.stopFollower();
      await h.host.stop();
    }
  }

  beforeAll(async () => {
    deps = { store: t.store, schedules: createScheduleRuntime(t.store), executions: createExecutionRuntime(t.store), workflows: createWorkflowRuntime(t.store) };
  });
  afterEach(() => stopHosts());

  const scheduleEvents = async (id: string) => (await t.store.readStream(scheduleStreamId(id))).map(asScheduleEvent);
  const requestedFor = async (id: string) =>
    (await allEvents(t.store, [EXECUTION_STREAM_PREFIX])).filter((e) => e.type === 'ExecutionRequested' && String((e.data as { idempotencyKey?: string }).idempotencyKey).startsWith(`schedule:${id}@`));

  it('three hosts racing fire each tick once, each starting exactly one execution, and none is lost', async () => {
    const ready = [startHost(), startHost(), startHost()];
    await Promise.all(ready.map((h) => h.ready));
    const endAt = new Date(Math.ceil(Date.now() / 1000) * 1000 + 5_000).toISOString();
    const { schedule } = await createSchedule({ ...deps, actions }, { id: 'race', every: '1s', action: 'core.noop', overlap: 'allow', endAt }, API_SCHEDULE_NAMES);
    await eventually('the schedule to pass its end', async () => (Date.now() > Date.parse(endAt) + 1_500 ? true : undefined), 15_000);

    const events = await scheduleEvents('race');
    const fired = events.flatMap((e) => (e.type === 'ScheduleTickFired' ? [e.data.tickAt] : []));
    expect(events.filter((e) => e.type === 'ScheduleTickSkipped')).toEqual([]);
    // Every tick of the grid, from creation to the end date, exactly once.
    const first = Date.parse(schedule.createdAt);
    const grid: string[] = [];
    for (let t = Math.floor(first / 1000) * 1000 + 1000; t < Date.parse(endAt); t += 1000) grid.push(new Date(t).toISOString());
    expect(fired).toEqual(grid);
    const requested = await requestedFor('race');
    const targets = events.flatMap((e) => (e.type === 'ScheduleTickFired' ? [`execution-${e.data.target.id}`] : []));
    expect(requested.map((e) => e.streamId).sort()).toEqual(targets.sort());
    // The stored history replays through the machine with no divergence from the recorded states.
    expect(replaySchedule(events)).toMatchObject({ events: events.length, divergences: [], finalState: 'Active' });
    expect(requested.map((e) => (e.data as { idempotencyKey: string }).idempotencyKey).sort()).toEqual(grid.map((t) => tickKey('race', { tickAt: t, manual: false })).sort());
  }, 30_000);

  it('a tick recorded by an executor that died before starting its target is started by the next host', async () => {
    const { schedule } = await createSchedule({ ...deps, actions }, { id: 'orphan', every: '1h', action: 'core.noop' }, API_SCHEDULE_NAMES);
    // What a killed executor leaves: the tick recorded (a manual one, so it may be now), its execution never submitted.
    const now = new Date().toISOString();
    const target = targetOf('orphan', schedule.spec, { tickAt: now, manual: true });
    await deps.schedules.dispatch('orphan', { type: 'ScheduleTickFired', data: { tickAt: now, fireAt: now, target, manual: true }, by: 'executor', eventId: tickEventId('orphan', now, true) });
    expect(await requestedFor('orphan')).toHaveLength(0);
    const host = startHost();
    await host.ready;
    const requested = await eventually('the orphaned tick’s execution', async () => {
      const r = await requestedFor('orphan');
      return r.length > 0 ? r : undefined;
    }, 10_000);
    expect(requested.map((e) => e.streamId)).toEqual([`execution-${target.id}`]);
  }, 20_000);

  it('a recent tick whose target retention archived is not started again: it ran, and its key went with it', async () => {
    const { schedule } = await createSchedule({ ...deps, actions }, { id: 'archived', every: '1h', action: 'core.noop' }, API_SCHEDULE_NAMES);
    const r = await triggerSchedule(deps, 'archived');
    const stream = `execution-${r.target.id}`;
    expect((await requestedFor('archived')).map((e) => e.streamId)).toEqual([stream]);
    // What retention leaves: the stream recorded as archived, and gone (its idempotency key with it).
    const client = await t.db.pool.connect();
    await recordArchived(client, [{ streamId: stream, events: 1, lastEventAt: new Date(), archive: '/archive/x.json' }], false).finally(() => client.release());
    await t.store.deleteStream(stream, { expectedRevision: 0n });
    expect(await requestedFor('archived')).toHaveLength(0);
    const asked: string[] = [];
    const host = startHost({ archived: async (id) => (asked.push(id), (await archivedStream(t.db.pool, id)) !== undefined) });
    await host.ready;
    await eventually('the host to look at the tick', async () => (asked.includes(stream) ? true : undefined), 10_000);
    // A tick since, not archived, is started as ever.
    const next = await triggerSchedule(deps, 'archived');
    await eventually('the later tick’s execution', async () => ((await requestedFor('archived')).length > 0 ? true : undefined), 10_000);
    expect((await requestedFor('archived')).map((e) => e.streamId)).toEqual([`execution-${next.target.id}`]);
    expect(schedule.spec.target.kind).toBe('action');
  }, 20_000);

  it('a manual trigger records a tick and starts its execution once; pause stops the plan, delete ends the schedule', async () => {
    const { schedule } = await createSchedule({ ...deps, actions }, { id: 'manual', cron: '0 3 * * *', timezone: 'Europe/Berlin', action: 'core.echo', input: { hello: 'world' } }, API_SCHEDULE_NAMES);
    expect(schedule.nextFireTimes).toHaveLength(5);
    const r = await triggerSchedule(deps, 'manual');
    expect(r.started).toBe(true);
    const loaded = await deps.executions.load(r.target.id);
    expect(loaded.snapshot.context).toMatchObject({ action: 'core.echo', input: { hello: 'world' }, idempotencyKey: tickKey('manual', { tickAt: r.tickAt, manual: true }) });
    expect(await changeSchedule(deps, 'manual', 'pause', 'holiday')).toMatchObject({ changed: true, status: 'Paused' });
    expect(await changeSchedule(deps, 'manual', 'pause')).toMatchObject({ changed: false });
    expect((await showSchedule(deps, 'manual')).nextFireTimes).toEqual([]);
    expect(await changeSchedule(deps, 'manual', 'delete')).toMatchObject({ changed: true, status: 'Deleted' });
    await expect(triggerSchedule(deps, 'manual')).rejects.toThrow(/deleted/);
    // Deleting again is a retry; pausing or resuming what is deleted is refused, as a trigger is.
    expect(await changeSchedule(deps, 'manual', 'delete')).toMatchObject({ changed: false, status: 'Deleted' });
    await expect(changeSchedule(deps, 'manual', 'pause')).rejects.toThrow('schedule manual is deleted; nothing to pause');
    await expect(changeSchedule(deps, 'manual', 'resume')).rejects.toThrow('schedule manual is deleted; nothing to resume');
    const view = await showSchedule(deps, 'manual');
    expect(view).toMatchObject({ status: 'Deleted', fired: 1 });
    // Its id keeps its history: creating it again, even with the same definition, says so.
    await expect(createSchedule({ ...deps, actions }, { id: 'manual', cron: '0 3 * * *', timezone: 'Europe/Berlin', action: 'core.echo', input: { hello: 'world' } }, API_SCHEDULE_NAMES)).rejects.toThrow(
      `schedule id "manual" belonged to a schedule deleted at ${view.deletedAt}; an id is not used again once its schedule is deleted (its history stays under it): choose another id`,
    );
  });

  it('refuses a bad schedule naming every field at fault, and writes nothing', async () => {
    const err = await createSchedule(
      { ...deps, actions },
      { id: 'bad', cron: '61 * * * *', timezone: 'Mars/Olympus', action: 'core.nope', jitter: '2h', overlap: 'sometimes', catchUp: -1, startAt: '2026-13-01T00:00:00Z' },
      API_SCHEDULE_NAMES,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).problems.map((p) => p.path)).toEqual(['timezone', 'cron', 'action', 'jitter', 'overlap', 'catchUp', 'startAt']);
    expect(await t.store.readStream(scheduleStreamId('bad'))).toEqual([]);
    const again = await createSchedule({ ...deps, actions }, { id: 'same', every: '5m', action: 'core.noop' }, API_SCHEDULE_NAMES);
    const twice = await createSchedule({ ...deps, actions }, { id: 'same', every: '5m', action: 'core.noop' }, API_SCHEDULE_NAMES);
    expect([again.created, twice.created]).toEqual([true, false]);
    await expect(createSchedule({ ...deps, actions }, { id: 'same', every: '6m', action: 'core.noop' }, API_SCHEDULE_NAMES)).rejects.toThrow(/already used/);
    expect((await allEvents(t.store, [SCHEDULE_STREAM_PREFIX])).filter((e) => e.streamId === scheduleStreamId('same'))).toHaveLength(1);
  });

  it('overlap skip: no new run while the previous is unfinished (no worker here: it stays Requested)', async () => {
    await startHost().ready;
    await createSchedule({ ...deps, actions }, { id: 'skip', every: '1s', action: 'core.noop', overlap: 'skip' }, API_SCHEDULE_NAMES);
    const events = await eventually('a few ticks', async () => {
      const e = await scheduleEvents('skip');
      return e.filter((x) => x.type === 'ScheduleTickSkipped').length >= 2 ? e : undefined;
    }, 10_000);
    const ticks = events.filter((e) => e.type === 'ScheduleTickFired' || e.type === 'ScheduleTickSkipped');
    expect(ticks[0]!.type).toBe('ScheduleTickFired');
    expect(ticks.slice(1).every((e) => e.type === 'ScheduleTickSkipped' && e.data.reason === 'overlap')).toBe(true);
    expect(await requestedFor('skip')).toHaveLength(1);
  }, 20_000);

  it('overlap cancel-previous: each tick cancels the run before it', async () => {
    await startHost().ready;
    await createSchedule({ ...deps, actions }, { id: 'replace', every: '1s', action: 'core.noop', overlap: 'cancel-previous' }, API_SCHEDULE_NAMES);
    const fired = await eventually('three ticks', async () => {
      const f = (await scheduleEvents('replace')).flatMap((e) => (e.type === 'ScheduleTickFired' ? [e.data] : []));
      return f.length >= 3 ? f : undefined;
    }, 10_000);
    expect(fired[1]!.previous).toEqual(fired[0]!.target);
    const first = await eventually('the first run cancelled', async () => {
      const s = (await deps.executions.load(fired[0]!.target.id)).snapshot;
      return isFinal(s) ? s : undefined;
    }, 5_000);
    expect(statusOf(first)).toBe('Cancelled');
  }, 20_000);

  it('targets a workflow: each tick starts one, by the id its event names', async () => {
    await startHost().ready;
    const definition = { name: 'tick-flow', steps: [{ id: 'a', action: 'core.noop' }] };
    await createSchedule({ ...deps, actions }, { id: 'flow', every: '1s', workflow: definition, overlap: 'allow' }, API_SCHEDULE_NAMES);
    const fired = await eventually('a tick', async () => (await scheduleEvents('flow')).find((e) => e.type === 'ScheduleTickFired'), 10_000);
    if (fired.type !== 'ScheduleTickFired') throw new Error('not a tick');
    expect(fired.data.target.kind).toBe('workflow');
    const w = await eventually('its workflow', () => loadWorkflow(t.store, fired.data.target.id).catch(() => undefined), 5_000);
    expect(w.snapshot.context.definition.name).toBe('tick-flow');
  }, 20_000);

  it('after downtime, skips the missed ticks but the newest catchUp ones', async () => {
    // Created ten minutes ago, while no executor ran.
    const tenMinutesAgo = () => new Date(Date.now() - 10 * 60_000);
    await createSchedule({ ...deps, clock: tenMinutesAgo, actions }, { id: 'late', every: '1m', action: 'core.noop', catchUp: 2, overlap: 'allow' }, API_SCHEDULE_NAMES);
    await startHost().ready;
    const events = await eventually('the catch-up', async () => {
      const e = await scheduleEvents('late');
      return e.filter((x) => x.type === 'ScheduleTickFired').length >= 2 ? e : undefined;
    }, 10_000);
    const skipped = events.filter((e) => e.type === 'ScheduleTickSkipped');
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.data).toMatchObject({ reason: 'missed' });
    const fired = events.flatMap((e) => (e.type === 'ScheduleTickFired' ? [Date.parse(e.data.tickAt)] : []));
    // The newest two missed ones (and one on time, if one is due) ran; everything before was skipped.
    expect(fired.length).toBeGreaterThanOrEqual(2);
    expect(fired.length).toBeLessThanOrEqual(3);
    expect(Date.parse((skipped[0]!.data as { tickAt: string }).tickAt)).toBeLessThan(fired[0]!);
    expect((skipped[0]!.data as { count: number }).count + fired.length).toBeGreaterThanOrEqual(9);
  }, 20_000);
});
