// Fault scenarios on workers and servers: SIGKILL/SIGSTOP a worker, a worker stopped before it
// starts, killed after a side effect, nats-server and Postgres restarts, duplicate and
// redelivered work. They rely on the executor's schedule-to-start reclaim and dead-worker
// detection (stale heartbeat → WorkerLost + reclaim), with the short timeouts the harness sets
// (FAST_TIMEOUTS: BATON_SCHEDULE_TO_START_TIMEOUT=2s, BATON_HEARTBEAT_INTERVAL=500ms, …).
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import { connect as natsConnect } from 'nats';
import { describe, expect, it } from 'vitest';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { START } from '../../src/eventstore/event-store.ts';
import { createNatsWorkTransport } from '../../src/transport/nats/index.ts';
import { describeReport } from '../../src/verify/invariants.ts';
import { makeRunDir, runScenario, sleep, until, useFaultEnvironment, type FaultScenario } from './harness.ts';

const sleepInput = (i: number, base: number, spread: number) => ({ action: 'core.sleep', input: { ms: base + ((i * 37) % spread) }, maxAttempts: 3 });

/** A directory the fault actions write their markers into (removed by the caller). */
async function markerDir(): Promise<string> {
  const dir = await makeRunDir('marks');
  await fs.chmod(dir, 0o777);
  return dir;
}
const markers = async (dir: string) => new Set((await fs.readdir(dir)).filter((f) => f !== 'owner.pid'));

/** An executor and two workers of capacity 8: their ids, and worker 1's process (the one a scenario hits). */
async function executorAndTwoWorkers(s: FaultScenario) {
  s.executor();
  const [id1, id2] = [s.workerId(1), s.workerId(2)];
  const w1 = await s.worker({ id: id1, capacity: 8 });
  await s.worker({ id: id2, capacity: 8 });
  return { id1, id2, w1 };
}

/** The same, with 200 sleeps of 0.3–1.2 s submitted, once worker 1 runs at least four of them. */
async function twoWorkersBusy(s: FaultScenario) {
  const workers = await executorAndTwoWorkers(s);
  await s.submit(200, (i) => sleepInput(i, 300, 900));
  await until('runs on worker 1', async () => (await s.runningOn(workers.id1)).length >= 4, 30_000);
  return workers;
}

/**
 * Every execution in `ids` was taken back from `workerId` (OwnershipReclaimed naming it) and then
 * completed. `ids` is read just before the signal, so the worker may have finished some in
 * between: an outcome the worker stored in a transaction that began before `signalledAt` (its
 * recordedAt is the transaction's start) was not held at the signal, and is left out. One
 * stored later would be a run the signal should have stopped, and fails.
 */
async function expectReclaimedAndCompleted(s: FaultScenario, ids: string[], workerId: string, signalledAt = -Infinity): Promise<void> {
  let reclaimed = 0;
  for (const id of ids) {
    const events = await s.eventsOf(id);
    const story = events.map((e) => `${e.type}(${String(e.metadata.by)})`).join(' → ');
    const wasReclaimed = events.some((e) => e.type === 'OwnershipReclaimed' && (e.data as { workerId: string }).workerId === workerId);
    const last = events.at(-1);
    if (!wasReclaimed && last?.type === 'ExecutionCompleted' && last.metadata.by === `worker:${workerId}` && last.recordedAt.getTime() <= signalledAt) continue;
    expect(wasReclaimed, `${id} reclaimed from ${workerId}: ${story}${last ? ` (last recorded ${last.recordedAt.toISOString()}, signalled ${Number.isFinite(signalledAt) ? new Date(signalledAt).toISOString() : 'never'})` : ''}`).toBe(true);
    expect(last?.type, `${id}: ${story}`).toBe('ExecutionCompleted');
    reclaimed++;
  }
  expect(reclaimed, 'executions held by the worker at the signal and reclaimed').toBeGreaterThan(0);
}

describe('fault injection: needs the executor liveness features', () => {
  const env = useFaultEnvironment('worker and server faults (test/faults/worker-faults.test.ts)');

  it('(e) SIGKILL a worker with executions in flight: declared lost, its executions reclaimed and run elsewhere', { timeout: 150_000 }, () =>
    runScenario(env(), '(e) SIGKILL a worker in flight', async (s) => {
      const { id1, w1 } = await twoWorkersBusy(s);

      let signalledAt = 0;
      const held = await s.fault(
        'SIGKILL worker 1',
        async () => {
          w1.signal('SIGKILL');
          signalledAt = Date.now();
          await w1.exited;
        },
        { hits: () => s.heldBy(id1) },
      );
      expect(held.length).toBeGreaterThan(0);

      await s.expectAllTerminal(90_000);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      expect(await s.workerEvents(id1)).toContain('WorkerLost');
      await expectReclaimedAndCompleted(s, held, id1, signalledAt);
    }));

  it('(f) SIGSTOP a worker past staleness, then SIGCONT: reclaimed meanwhile, and its late outcomes are fenced off', { timeout: 150_000 }, () =>
    runScenario(env(), '(f) SIGSTOP past staleness, SIGCONT', async (s) => {
      const { id1, w1 } = await twoWorkersBusy(s);

      let signalledAt = 0;
      const held = await s.fault('SIGSTOP worker 1', () => {
        w1.signal('SIGSTOP');
        signalledAt = Date.now();
      }, { hits: () => s.heldBy(id1) });
      expect(held.length).toBeGreaterThan(0);
      // Stale after 3 × 500 ms: it must be declared lost while it is stopped.
      await until('worker 1 declared lost', async () => (await s.workerEvents(id1)).includes('WorkerLost'), 20_000);
      await sleep(1_000);
      w1.signal('SIGCONT');

      await s.expectAllTerminal(90_000);
      await sleep(2_000); // the resumed worker tries to append its stale outcomes now
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      expect(w1.alive(), 'the resumed worker carries on').toBe(true);
      await expectReclaimedAndCompleted(s, held, id1, signalledAt);
    }));

  it('(g) a worker stopped right after handoff, before it starts: reclaimed, run elsewhere, never started late', { timeout: 150_000 }, () =>
    runScenario(env(), '(g) stopped after handoff, before start', async (s) => {
      const { id1, w1 } = await executorAndTwoWorkers(s);
      // Frozen first, so what the executor hands it while its last heartbeat still looks fresh never starts.
      w1.signal('SIGSTOP');
      const stoppedAt = Date.now();
      await s.submit(100, (i) => sleepInput(i, 50, 200), { batch: 100 });
      await sleep(500);
      const handed = await s.handedOffTo(id1);
      s.recordFault('SIGSTOP worker 1 before it starts its handoffs', stoppedAt, handed);
      expect(handed.length, 'executions handed off to the stopped worker').toBeGreaterThan(0);

      await s.expectAllTerminal(60_000);
      w1.signal('SIGCONT'); // it wakes up holding stale work messages
      await sleep(3_000);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      await expectReclaimedAndCompleted(s, handed, id1);
      for (const id of handed) {
        const lateStarts = (await s.eventsOf(id)).filter((e) => e.type === 'ExecutionStarted' && e.metadata.by === `worker:${id1}`);
        expect(lateStarts, `${id}: the woken worker must not start it`).toEqual([]);
      }
    }));

  it('(h) SIGKILL a worker after the side effect, before the outcome: rerun as a new, visible attempt', { timeout: 150_000 }, async () => {
    const dir = await markerDir();
    try {
      await runScenario(env(), '(h) SIGKILL after side effect', async (s) => {
        s.executor();
        const [id1, id2] = [s.workerId(1), s.workerId(2)];
        const w1 = await s.worker({ id: id1, capacity: 8 });
        const ids = await s.submit(8, () => ({ action: 'faults.side-effect', input: { dir, blockAttempts: 1 }, maxAttempts: 3 }));
        await until('every first attempt past its side effect', async () => {
          const m = await markers(dir);
          return ids.every((id) => m.has(`${id}.1`));
        }, 30_000);
        await s.worker({ id: id2, capacity: 8 });

        const held = await s.fault(
          'SIGKILL worker 1 after the side effects',
          async () => {
            w1.signal('SIGKILL');
            await w1.exited;
          },
          { hits: () => s.heldBy(id1) },
        );
        expect(held.sort()).toEqual([...ids].sort());

        await s.expectAllTerminal(60_000);
        const r = await s.check();
        expect(r.ok, describeReport(r)).toBe(true);
        const m = await markers(dir);
        for (const id of ids) {
          const events = await s.eventsOf(id);
          const starts = events.filter((e) => e.type === 'ExecutionStarted').map((e) => [(e.data as { attempt: number }).attempt, e.metadata.by]);
          // At least once: the effect ran twice, and the history says so as two attempts.
          expect(m.has(`${id}.1`) && m.has(`${id}.2`), `${id}: markers of both attempts`).toBe(true);
          expect(starts).toEqual([[1, `worker:${id1}`], [2, `worker:${id2}`]]);
          expect(events.at(-1)).toMatchObject({ type: 'ExecutionCompleted', data: { result: { attempt: 2 } }, metadata: { by: `worker:${id2}` } });
        }
      });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it('(i) restart nats-server twice under load: nothing waits on a message the restart lost', { timeout: 180_000 }, () =>
    runScenario(env(), '(i) restart nats-server under load', async (s) => {
      s.executor();
      await s.worker({ id: s.workerId(1), capacity: 16 });
      await s.worker({ id: s.workerId(2), capacity: 16 });
      const load = s.submitContinuously((i) => sleepInput(i, 5, 100), { batch: 20, pauseMs: 50, max: 600 });
      await s.waitForTerminalCount(100, 60_000);
      for (let k = 1; k <= 2; k++) {
        await s.fault(`restart nats-server #${k} (1 s down)`, () => s.env.nats.restart({ downMs: 1_000 }));
        await sleep(3_000);
      }
      const { acknowledged } = await load.stop();
      expect(acknowledged).toBe(600);

      await s.expectAllTerminal(120_000);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      for (const p of s.processes) expect(p.alive(), `${p.name} survived`).toBe(true);
    }));

  it('(j) stop Postgres immediately mid-load, start it again: every acknowledged submission completes, the read model equals a rebuild', { timeout: 180_000 }, () =>
    runScenario(env(), '(j) Postgres immediate stop + start', async (s) => {
      s.executor();
      s.projector();
      await s.worker({ id: s.workerId(1), capacity: 16 });
      await s.worker({ id: s.workerId(2), capacity: 16 });
      const load = s.submitContinuously((i) => sleepInput(i, 5, 100), { batch: 20, pauseMs: 50 });
      await s.waitForTerminalCount(100, 60_000);
      await s.fault('pg_ctl stop -m immediate, 2 s down, start', async () => {
        await s.env.pg.stopImmediately();
        await sleep(2_000);
        await s.env.pg.start();
      });
      await sleep(3_000);
      const { acknowledged, refused } = await load.stop();
      s.addNote(`${acknowledged} acknowledged, ${refused} refused while down`);

      await s.expectAllTerminal(120_000);
      await s.waitForProjector(60_000);
      const r = await s.check({ readModel: true });
      expect(r.ok, describeReport(r)).toBe(true);
      for (const p of s.processes) expect(p.alive(), `${p.name} survived`).toBe(true);
    }));

  it('(k) every work message delivered twice (a duplicate under a new message id): each attempt still runs once', { timeout: 150_000 }, () =>
    runScenario(env(), '(k) every message delivered twice', async (s) => {
      s.executor();
      await s.worker({ id: s.workerId(1), capacity: 16 });
      await s.worker({ id: s.workerId(2), capacity: 16 });
      const nc = await natsConnect({ servers: s.env.nats.url });
      const transport = await createNatsWorkTransport(nc);
      const ac = new AbortController();
      let duplicates = 0;
      const actions = new Map<string, string>();
      // Follow the store and publish every handoff's work again, as a second, distinct message.
      const duplicator = (async () => {
        for await (const e of s.store.subscribe({ after: START, streamPrefixes: [EXECUTION_STREAM_PREFIX], signal: ac.signal })) {
          const executionId = e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
          if (e.type === 'ExecutionRequested') actions.set(executionId, (e.data as { action: string }).action);
          if (e.type !== 'ExecutionHandedOff') continue;
          const data = e.data as { workerId: string; attempt: number };
          await transport.publish([
            {
              messageId: randomUUID(),
              executionId,
              workerId: data.workerId,
              runtime: 'node',
              action: actions.get(executionId) ?? 'core.sleep',
              attempt: data.attempt,
              handoffRevision: String(e.revision),
              publishedAt: new Date().toISOString(),
            },
          ]);
          duplicates++;
        }
      })().catch((err: unknown) => {
        if (!ac.signal.aborted) throw err;
      });
      try {
        await s.submit(300, (i) => sleepInput(i, 0, 50));
        await s.expectAllTerminal(90_000);
        await until('a duplicate for every handoff', async () => duplicates >= 300, 30_000);
        await sleep(2_000); // the last duplicates are delivered and dropped
      } finally {
        ac.abort();
        await duplicator;
        await transport.close();
        await nc.close();
      }
      s.recordFault(`${duplicates} duplicate work messages`, Date.now(), []);
      const r = await s.check();
      expect(r.ok, describeReport(r)).toBe(true);
      expect(r.duplicatedRuns).toBe(0);
    }));

  it("(k') a worker SIGKILLed before acking, restarted under the same id: the redelivery does not run the attempt again", { timeout: 150_000 }, async () => {
    const dir = await markerDir();
    try {
      await runScenario(env(), "(k') redelivery to a restarted worker", async (s) => {
        s.executor();
        const id1 = s.workerId(1);
        const w1 = await s.worker({ id: id1, capacity: 8 });
        const ids = await s.submit(8, () => ({ action: 'faults.side-effect', input: { dir, blockAttempts: 1 }, maxAttempts: 3 }));
        await until('every first attempt running', async () => {
          const m = await markers(dir);
          return ids.every((id) => m.has(`${id}.1`));
        }, 30_000);
        await s.fault(
          'SIGKILL worker 1 before it acks, restart it under the same id',
          async () => {
            w1.signal('SIGKILL');
            await w1.exited;
            await s.worker({ id: id1, capacity: 8 });
          },
          { hits: async () => ids },
        );

        // JetStream redelivers the unacked messages after ack-wait; the executor may reclaim first.
        await s.expectAllTerminal(90_000);
        await sleep(2_000);
        const r = await s.check();
        expect(r.ok, describeReport(r)).toBe(true);
        for (const id of ids) {
          const events = await s.eventsOf(id);
          const attempts = events.filter((e) => e.type === 'ExecutionStarted').map((e) => (e.data as { attempt: number }).attempt);
          expect(attempts, `${id}: attempts started`).toEqual([1, 2]);
          expect(events.at(-1)).toMatchObject({ type: 'ExecutionCompleted', data: { result: { attempt: 2 } } });
        }
      });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
