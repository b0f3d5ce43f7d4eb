// The executor and namespaces, end to end over the real store and queue: an execution is handed
// only to a worker serving its namespace (announced in WorkerStarted), and no more executions of
// a namespace hold a slot at once than BATON_NAMESPACE_CONCURRENCY allows.
import { describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { waitingReasonNow } from '../../src/liveness/waiting-reason.ts';
import { silentLogger } from '../../src/log.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { startWorkerHost } from '../../src/worker/worker-host.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';

describe('placement by namespace', () => {
  const cluster = useInProcessExecutor({ scheduleToStartMs: 60_000, monitorEveryMs: 100, namespaceConcurrency: { 'team-b': 1 } });

  async function startWorker(workerId: string, namespaces: string[] | undefined) {
    const { store, liveness } = cluster();
    const w = { actions: ['ns.work'], runtimes: ['node'], capacity: 10 };
    await recordWorkerEvent(createWorkerRuntime(store), workerId, 'WorkerStarted', { ...w, ...(namespaces && { namespaces }) });
    await liveness.beat({ workerId, ...w, inFlight: 0, draining: false }, { starting: true });
  }
  const handedTo = async (id: string) => {
    const s = (await cluster().runtime.load(id, { fresh: true })).snapshot;
    return statusOf(s) === 'Scheduled' ? s.context.workerId : undefined;
  };

  it('hands each execution to a worker of its namespace only, and holds a namespace at its limit', async () => {
    const { runtime } = cluster();
    await startWorker('only-a', ['team-a']);
    const a = (await runtime.submit({ action: 'ns.work', input: null, namespace: 'team-a' })).executionId;
    const c = (await runtime.submit({ action: 'ns.work', input: null, namespace: 'team-c' })).executionId;
    expect(await eventually('the team-a execution handed off', () => handedTo(a), 10_000)).toBe('only-a');
    // No worker serves team-c yet: it waits.
    expect(statusOf((await runtime.load(c, { fresh: true })).snapshot)).toBe('Requested');

    await startWorker('any', undefined);
    expect(await eventually('the team-c execution handed off', () => handedTo(c), 10_000)).toBe('any');

    // team-b: at most one at a time (the handoffs are never started here, so each keeps its slot).
    const b = await Promise.all([1, 2, 3].map(async () => (await runtime.submit({ action: 'ns.work', input: null, namespace: 'team-b' })).executionId));
    await eventually('one team-b execution handed off', async () => ((await Promise.all(b.map(handedTo))).some((w) => w !== undefined) ? true : undefined), 10_000);
    await new Promise((r) => setTimeout(r, 500)); // passes that could wrongly hand off more
    const statuses = await Promise.all(b.map(async (id) => statusOf((await runtime.load(id, { fresh: true })).snapshot)));
    expect(statuses.filter((s) => s === 'Scheduled')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'Requested')).toHaveLength(2);
  });

  it('a worker host serving some namespaces says so in its heartbeat: an execution of another waits, saying why', async () => {
    const { runtime, store, transport, liveness } = cluster();
    const worker = await startWorkerHost({ workerId: 'serves-x', store, runtime, transport, liveness, actions: createActionRegistry([...builtinActions]), capacity: 2, log: silentLogger(), namespaces: ['team-x'], heartbeatIntervalMs: 1_000 });
    try {
      expect((await liveness.list()).find((w) => w.workerId === 'serves-x')).toMatchObject({ namespaces: ['team-x'], transport: 'postgres' });
      const { executionId } = await runtime.submit({ action: 'core.echo', input: { n: 1 }, namespace: 'team-y' });
      const c = (await runtime.load(executionId, { fresh: true })).snapshot.context;
      expect(await waitingReasonNow(liveness, { status: 'Requested', action: c.action, namespace: c.namespace, retryAt: c.retryAt }, 30_000)).toBe(
        'no live worker offers action "core.echo" to namespace "team-y" (the ones that do serve only "team-x")',
      );
      await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'test done' }, by: 'executor' });
    } finally {
      await worker.stop();
    }
  });
});
