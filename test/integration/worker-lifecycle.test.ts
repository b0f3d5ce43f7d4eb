// A worker's own stream against the real Postgres event store: refusals name the worker (not an
// "execution"), and a process declared lost announces itself again exactly once.
import { describe, expect, it } from 'vitest';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { WorkerEventRefusedError } from '../../src/errors.ts';
import { announceAgainIfLost } from '../../src/worker/worker-lifecycle.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { useTestStore } from '../support/test-store.ts';

const announcement = { actions: ['core.noop'], runtimes: ['node'], capacity: 2 };

describe('worker lifecycle on its stream', () => {
  const t = useTestStore();
  const types = async (id: string) => (await t.store.readStream(workerStreamId(id))).map((e) => e.type);

  async function lostWorker(id: string): Promise<void> {
    await recordWorkerEvent(createWorkerRuntime(t.store), id, 'WorkerStarted', announcement);
    await recordWorkerEvent(createWorkerRuntime(t.store), id, 'WorkerLost', { lastHeartbeatAt: new Date().toISOString(), reason: 'no heartbeat for 31 s' }, { by: 'executor' });
  }

  it('a refused lifecycle event names the worker, its state and why', async () => {
    await lostWorker('w-refused');
    const err = await recordWorkerEvent(createWorkerRuntime(t.store), 'w-refused', 'WorkerDraining', { reason: 'SIGTERM' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkerEventRefusedError);
    expect(err).toMatchObject({ workerId: 'w-refused', eventType: 'WorkerDraining', state: 'Lost' });
    expect((err as Error).message).toBe('worker w-refused: WorkerDraining refused in state Lost: WorkerDraining is not allowed in state Lost');
  });

  it('announces a lost worker again once, however many ask at once, and then it may drain and stop', async () => {
    await lostWorker('w-back');
    const results = await Promise.all(Array.from({ length: 5 }, () => announceAgainIfLost(createWorkerRuntime(t.store), 'w-back', announcement)));
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await types('w-back')).toEqual(['WorkerStarted', 'WorkerLost', 'WorkerStarted']);
    await recordWorkerEvent(createWorkerRuntime(t.store), 'w-back', 'WorkerDraining', { reason: 'SIGTERM' });
    await recordWorkerEvent(createWorkerRuntime(t.store), 'w-back', 'WorkerStopped', { reason: 'SIGTERM' });
    expect(await announceAgainIfLost(createWorkerRuntime(t.store), 'w-back', announcement), 'a stopped worker is not lost').toBe(false);
    expect(await types('w-back')).toEqual(['WorkerStarted', 'WorkerLost', 'WorkerStarted', 'WorkerDraining', 'WorkerStopped']);
  });

  it('does not announce a worker that is not lost', async () => {
    await recordWorkerEvent(createWorkerRuntime(t.store), 'w-active', 'WorkerStarted', announcement);
    expect(await announceAgainIfLost(createWorkerRuntime(t.store), 'w-active', announcement)).toBe(false);
    expect(await types('w-active')).toEqual(['WorkerStarted']);
  });
});
