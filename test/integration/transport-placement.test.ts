// An executor places work only on workers that pull from its own transport: a worker started with
// the other `--transport` never saw the work, and every handoff to it was reclaimed at its
// schedule-to-start deadline until the execution was abandoned. The executor says so once.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';

const lines: { msg: string; workerId?: string }[] = [];
const log = pino({ level: 'warn' }, new Writable({ write: (c: Buffer, _e, done) => (lines.push(JSON.parse(c.toString())), done()) }));

describe('placement by transport', () => {
  const cluster = useInProcessExecutor({ scheduleToStartMs: 60_000, monitorEveryMs: 100, log });

  async function startWorker(workerId: string, transport: 'nats' | 'postgres' | undefined) {
    const { store, liveness } = cluster();
    const w = { actions: ['tx.work'], runtimes: ['node'], capacity: 10 };
    await recordWorkerEvent(createWorkerRuntime(store), workerId, 'WorkerStarted', w);
    await liveness.beat({ workerId, ...w, inFlight: 0, draining: false, ...(transport && { transport }) }, { starting: true });
  }
  const status = async (id: string) => (await cluster().runtime.load(id, { fresh: true })).snapshot;

  it('passes over a worker on the other transport, saying so once, and hands off to one on its own', async () => {
    const { runtime, transport } = cluster();
    expect(transport.kind).toBe('postgres');
    await startWorker('on-nats', 'nats');
    const id = (await runtime.submit({ action: 'tx.work', input: null })).executionId;
    await eventually('the executor to say it passes over on-nats', async () => (lines.some((l) => l.workerId === 'on-nats') ? true : undefined), 10_000);
    expect(statusOf(await status(id))).toBe('Requested');
    expect(lines.filter((l) => l.workerId === 'on-nats')).toEqual([
      expect.objectContaining({ msg: 'worker on-nats pulls from the nats transport, but this executor publishes to postgres: no work is placed on it (start both with the same --transport)' }),
    ]);

    await startWorker('on-postgres', 'postgres');
    const handed = await eventually('a handoff', async () => {
      const s = await status(id);
      return statusOf(s) === 'Scheduled' ? s.context.workerId : undefined;
    }, 10_000);
    expect(handed).toBe('on-postgres');
    // A worker that does not say its transport (one from before) is taken at its word.
    await startWorker('unsaid', undefined);
    const other = (await runtime.submit({ action: 'tx.work', input: null })).executionId;
    await eventually('the second handoff', async () => (statusOf(await status(other)) === 'Scheduled' ? true : undefined), 10_000);
    expect(lines.filter((l) => l.workerId === 'on-nats')).toHaveLength(1);
  });
});
