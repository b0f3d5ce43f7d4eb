// Fault injection with what the executor does today: hosts drained, killed, racing, and cut
// off from Postgres while executions are in flight. Each scenario runs real Baton processes on
// a private Postgres and nats-server, then the invariant checker must find every acknowledged
// submission terminal exactly once, no attempt run twice, and no history out of order.
import { describe, expect, it } from 'vitest';
import { describeReport } from '../../src/verify/invariants.ts';
import { runScenario, sleep, until, useFaultEnvironment, type BatonProcess } from './harness.ts';

/** Resolves with the process's exit, or throws after `ms`. */
async function exitWithin(p: BatonProcess, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${p.name} did not exit within ${ms} ms:\n${p.tail()}`)), ms);
  });
  try {
    return await Promise.race([p.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const sleepInput = (i: number, base: number, spread: number) => ({ action: 'core.sleep', input: { ms: base + ((i * 37) % spread) }, maxAttempts: 3 });

describe('fault injection: processes', () => {
  const env = useFaultEnvironment('process faults (test/faults/process-faults.test.ts)');

  it('(a) SIGTERM a worker with executions in flight: it drains and releases, another worker finishes', { timeout: 150_000 }, () =>
    runScenario(env(), '(a) SIGTERM a worker in flight', async (s) => {
      s.executor();
      const [id1, id2] = [s.workerId(1), s.workerId(2)];
      const w1 = await s.worker({ id: id1, capacity: 8, shutdownTimeoutMs: 300 });
      await s.worker({ id: id2, capacity: 8 });
      await s.submit(200, (i) => sleepInput(i, 300, 900));
      await until('runs on worker 1', async () => (await s.runningOn(id1)).length >= 4, 30_000);

      const held = await s.fault('SIGTERM worker 1', () => w1.signal('SIGTERM'), { hits: () => s.heldBy(id1) });
      expect((await exitWithin(w1, 30_000)).code, 'a drained worker exits 0').toBe(0);
      expect(await s.workerEvents(id1)).toEqual(['WorkerStarted', 'WorkerDraining', 'WorkerStopped']);

      await s.expectAllTerminal(90_000);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      // What worker 1 could not finish in its 300 ms grace it released, and worker 2 completed.
      for (const id of held) expect((await s.eventsOf(id)).at(-1)?.type, id).toBe('ExecutionCompleted');
    }));

  it('(b) SIGKILL the projector and one executor mid-stream: the other executor goes on, a new projector catches up exactly', { timeout: 150_000 }, () =>
    runScenario(env(), '(b) SIGKILL projector + executor', async (s) => {
      const e1 = s.executor('executor 1');
      s.executor('executor 2');
      const projector = s.projector('projector 1');
      await s.worker({ id: s.workerId(1), capacity: 16 });
      await s.worker({ id: s.workerId(2), capacity: 16 });
      const load = s.submitContinuously((i) => sleepInput(i, 5, 50), { batch: 25, pauseMs: 20, max: 800 });
      await s.waitForTerminalCount(150, 60_000);

      await s.fault('SIGKILL projector and executor 1', async () => {
        projector.signal('SIGKILL');
        e1.signal('SIGKILL');
        await Promise.all([projector.exited, e1.exited]);
      });
      await sleep(1_000);
      s.projector('projector 2');
      const { acknowledged } = await load.stop();
      expect(acknowledged).toBe(800);

      await s.expectAllTerminal(90_000);
      await s.waitForProjector(60_000);
      const r = await s.check({ readModel: true });
      expect(r.ok, describeReport(r)).toBe(true);
      expect(r.readModel?.ok).toBe(true);
    }));

  it('(c) two executors race on the same 500 waiting executions: each is handed off once per attempt', { timeout: 150_000 }, () =>
    runScenario(env(), '(c) two executors racing on 500', async (s) => {
      // Submitted before either executor starts: both catch up on the same 500 and race for each.
      await s.submit(500, (i) => sleepInput(i, 0, 20));
      await s.worker({ id: s.workerId(1), capacity: 32 });
      await s.worker({ id: s.workerId(2), capacity: 32 });
      s.executor('executor 1');
      s.executor('executor 2');

      await s.expectAllTerminal(90_000);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      expect(r.statuses).toEqual({ Completed: 500 });
      // One handoff per attempt: the executor that lost a race appended nothing.
      const handoffs = await s.pool.query<{ n: string }>(`SELECT count(*) AS n FROM baton_events WHERE type = 'ExecutionHandedOff'`);
      const attempts = await s.pool.query<{ n: string }>(`SELECT count(*) AS n FROM baton_events WHERE type IN ('ExecutionRequested', 'ExecutionRetryScheduled')`);
      expect(Number(handoffs.rows[0]!.n)).toBe(Number(attempts.rows[0]!.n));
    }));

  it('(d) pg_terminate_backend every Baton connection, four times under load', { timeout: 150_000 }, () =>
    runScenario(env(), '(d) terminate Postgres connections', async (s) => {
      s.executor();
      s.projector();
      await s.worker({ id: s.workerId(1), capacity: 16 });
      await s.worker({ id: s.workerId(2), capacity: 16 });
      const load = s.submitContinuously((i) => sleepInput(i, 10, 200), { batch: 20, pauseMs: 50, max: 600 });
      await s.waitForTerminalCount(50, 60_000);
      for (let k = 1; k <= 4; k++) {
        await s.fault(`pg_terminate_backend #${k}`, async () => {
          const n = await s.env.pg.terminateBatonConnections(s.database);
          expect(n, 'Baton sessions to terminate').toBeGreaterThan(0);
        });
        await sleep(1_500);
      }
      await load.stop();

      await s.expectAllTerminal(90_000);
      await s.waitForProjector(60_000);
      const r = await s.check({ readModel: true });
      expect(r.ok, describeReport(r)).toBe(true);
      for (const p of s.processes) expect(p.alive(), `${p.name} survived`).toBe(true);
    }));
});
