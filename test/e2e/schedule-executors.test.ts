// The schedule invariant with real executor processes: three executors fire one schedule's
// ticks (every second, for 20 s); the one that fired most recently is SIGKILLed midway
// and a fresh one joins; then every executor is SIGKILLed at once and, 2.5 s later, one comes
// back. Every tick of the schedule's grid is fired exactly once (none twice, none lost, none
// skipped as missed; the outage's ticks late), and each fired tick started exactly one
// execution, the one its event names.
import { describe, expect, inject, it } from 'vitest';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { scheduleStreamId } from '../../schemas/schedule-events.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { asScheduleEvent, createScheduleRuntime } from '../../src/runtime/schedule-kind.ts';
import { API_SCHEDULE_NAMES } from '../../src/schedule/schedule-request.ts';
import { createSchedule } from '../../src/schedule/service.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { batonProcesses, type BatonProcess } from '../support/baton-processes.ts';
import { allEvents, eventually } from '../support/workflow-cluster.ts';
import { useTestStore } from '../support/test-store.ts';

describe('schedules across executors', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  const { start, diagnostics, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_LOG_LEVEL: 'info', ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}) }));

  const executor = (name: string) => start(name, ['executor', '--transport', transport, '--metrics-port', '0']);
  const caughtUp = (p: BatonProcess) => p.waitFor(/schedule host caught up/, 30_000);

  it(`no tick fired twice, none lost across an executor SIGKILL (${transport})`, async () => {
    const executors = ['executor-1', 'executor-2', 'executor-3'].map(executor);
    await Promise.all(executors.map(caughtUp)).catch((err: Error) => {
      throw new Error(`${err.message}\n${diagnostics()}`);
    });
    const deps = { store: t.store, schedules: createScheduleRuntime(t.store), executions: createExecutionRuntime(t.store), workflows: createWorkflowRuntime(t.store), actions: createActionRegistry(builtinActions) };
    const endAt = new Date(Math.ceil(Date.now() / 1000) * 1000 + 20_000).toISOString();
    const { schedule } = await createSchedule(deps, { id: 'every-second', every: '1s', action: 'core.noop', overlap: 'allow', endAt }, API_SCHEDULE_NAMES);

    // Midway, kill the executor that started the latest tick's execution, and bring in another.
    await new Promise((r) => setTimeout(r, 5_000));
    const latest = (p: BatonProcess) => {
      const lines = p.output.join('').split('\n').filter((l) => l.includes('started execution'));
      return lines.length === 0 ? '' : ((JSON.parse(lines.at(-1)!) as { tickAt: string }).tickAt ?? '');
    };
    const victim = [...executors].sort((a, b) => latest(b).localeCompare(latest(a)))[0]!;
    expect(latest(victim), diagnostics()).not.toBe('');
    victim.proc.kill('SIGKILL');
    await victim.exited;
    const late = executor('executor-4');
    await caughtUp(late);

    // Then every executor at once: the ticks of the outage fire late when one comes back.
    await new Promise((r) => setTimeout(r, 1_500));
    const survivors = [...executors.filter((e) => e !== victim), late];
    for (const e of survivors) e.proc.kill('SIGKILL');
    await Promise.all(survivors.map((e) => e.exited));
    const outageFrom = Date.now();
    await new Promise((r) => setTimeout(r, 2_500));
    await caughtUp(executor('executor-5'));

    const grid: string[] = [];
    for (let t = Math.floor(Date.parse(schedule.createdAt) / 1000) * 1000 + 1000; t < Date.parse(endAt); t += 1000) grid.push(new Date(t).toISOString());
    const fired = async () => (await t.store.readStream(scheduleStreamId('every-second'))).filter((e) => e.type === 'ScheduleTickFired').length;
    await eventually('every tick up to the end to be dealt with', async () => (Date.now() > Date.parse(endAt) + 1_000 && (await fired()) >= grid.length ? true : undefined), 40_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${diagnostics()}`);
    });
    const events = (await t.store.readStream(scheduleStreamId('every-second'))).map(asScheduleEvent);
    const ticks = events.flatMap((e) => (e.type === 'ScheduleTickFired' ? [e.data] : []));
    expect(events.filter((e) => e.type === 'ScheduleTickSkipped'), diagnostics()).toEqual([]);
    expect(ticks.map((f) => f.tickAt), diagnostics()).toEqual(grid);
    // Some ticks fell in the outage (no executor running) and still fired, late.
    expect(ticks.filter((t) => Date.parse(t.tickAt) >= outageFrom && Date.parse(t.tickAt) < outageFrom + 2_500).length).toBeGreaterThanOrEqual(2);

    const requested = (await allEvents(t.store, [EXECUTION_STREAM_PREFIX])).filter((e) => e.type === 'ExecutionRequested' && (e.data as { idempotencyKey?: string }).idempotencyKey?.startsWith('schedule:every-second@'));
    expect(requested.map((e) => e.streamId).sort()).toEqual(ticks.map((f) => `execution-${f.target.id}`).sort());
    expect(new Set(requested.map((e) => e.streamId)).size).toBe(grid.length);
  }, 90_000);
});
