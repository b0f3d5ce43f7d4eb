// An execution whose action no live worker offers: `baton status` says why it waits (read from
// the store and the liveness table, no executor needed), the executor's /metrics counts it per
// action, and after the no-worker timeout it is abandoned with that reason. A worker that comes
// in time (a deploy, a restart) ends the wait instead.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { runBaton } from '../support/cli.ts';
import { useInProcessExecutor } from '../support/in-process-executor.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { useTestStore } from '../support/test-store.ts';

const NO_WORKER_TIMEOUT_MS = 2_000;

describe('baton status: why an execution waits', () => {
  const t = useTestStore();
  const status = async (id: string, json = false) => {
    const r = await runBaton(['status', id, ...(json ? ['--json'] : [])], { databaseUrl: t.db.url });
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };

  it('names the action no live worker offers, counts draining ones, and says when a retry may go', { timeout: 60_000 }, async () => {
    const runtime = createExecutionRuntime(t.store);
    const liveness = createLivenessStore(t.db.pool);
    const { executionId } = await runtime.submit({ action: 'report.render', input: null });
    await liveness.beat({ workerId: 'leaving', actions: ['report.render'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: true }, { starting: true });
    expect(await status(executionId)).toMatch(/^waiting\s+no live worker offers action "report\.render" \(1 draining\)$/m);

    // Its first attempt went back to the executor, whose retry may not go before retryAt.
    const retryAt = new Date(Date.now() + 3_600_000).toISOString();
    await runtime.dispatch(executionId, [
      { type: 'SchedulingStarted', data: {}, by: 'executor' },
      { type: 'ExecutionHandedOff', data: { workerId: 'leaving', attempt: 1, deadline: retryAt }, by: 'executor' },
      { type: 'OwnershipReclaimed', data: { reason: 'schedule-to-start', workerId: 'leaving', attempt: 1 }, by: 'executor' },
      { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt, reason: 'backoff' }, by: 'executor' },
    ]);
    const json = JSON.parse(await status(executionId, true)) as { status: string; waiting: string | null };
    expect(json).toMatchObject({ status: 'Requested', waiting: `retry backoff until ${retryAt}` });

    await liveness.beat({ workerId: 'ready', actions: ['core.noop'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false }, { starting: true });
    const { executionId: offered } = await runtime.submit({ action: 'core.noop', input: null });
    expect(await status(offered)).not.toMatch(/^waiting/m); // a live worker offers it: the ordinary queue
  });
});

describe('executions whose action no live worker offers', () => {
  const registry = new Registry();
  const cluster = useInProcessExecutor({ registry, staleAfterMs: 30_000, monitorEveryMs: 50, noWorkerTimeoutMs: NO_WORKER_TIMEOUT_MS });
  const events = (id: string) => cluster().store.readStream(executionStreamId(id));
  /** `probe`'s value once it is truthy. */
  const until = <T>(what: string, probe: () => Promise<T | undefined | false>) => eventually(what, async () => (await probe()) || undefined, 10_000);
  const unofferedGauge = async (action: string) => {
    const metric = await registry.getSingleMetric('baton_executor_waiting_unoffered')!.get();
    return metric.values.find((v) => v.labels.action === action)?.value;
  };
  it('says why it waits, counts it, and abandons it after the no-worker timeout with that reason', { timeout: 60_000 }, async () => {
    const { runtime } = cluster();
    const submittedAt = Date.now();
    const { executionId } = await runtime.submit({ action: 'nobody.offers', input: null });
    const other = await runtime.submit({ action: 'nobody.offers', input: { n: 2 } });
    await until('the gauge to count both', async () => (await unofferedGauge('nobody.offers')) === 2);

    const abandoned = await until('abandonment', async () => {
      const e = await events(executionId);
      return e.at(-1)?.type === 'ExecutionAbandoned' && e;
    });
    expect(Date.now() - submittedAt).toBeGreaterThanOrEqual(NO_WORKER_TIMEOUT_MS);
    expect(abandoned.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionAbandoned']);
    expect(abandoned.at(-1)!.data).toEqual({ reason: 'no live worker offered action "nobody.offers" for 2s (BATON_NO_WORKER_TIMEOUT)' });
    await until('the other one too', async () => (await events(other.executionId)).at(-1)?.type === 'ExecutionAbandoned');
    await until('the gauge to drop the action', async () => (await unofferedGauge('nobody.offers')) === undefined);
  });

  it('does not abandon what waits for a worker that comes before the timeout (a deploy): the wait ends in a handoff', { timeout: 60_000 }, async () => {
    const { runtime, store, liveness } = cluster();
    const { executionId } = await runtime.submit({ action: 'deploy.soon', input: null });
    await until('the gauge to count it', async () => (await unofferedGauge('deploy.soon')) === 1);
    await new Promise((r) => setTimeout(r, NO_WORKER_TIMEOUT_MS / 2));
    // The new worker comes up: it announces itself and beats.
    await recordWorkerEvent(createWorkerRuntime(store), 'deployed', 'WorkerStarted', { actions: ['deploy.soon'], runtimes: ['node'], capacity: 4 });
    await liveness.beat({ workerId: 'deployed', actions: ['deploy.soon'], runtimes: ['node'], capacity: 4, inFlight: 0, draining: false }, { starting: true });
    const handed = await until('the handoff', async () => {
      const e = await events(executionId);
      return e.some((x: StoredEvent) => x.type === 'ExecutionHandedOff') && e;
    });
    expect(handed.find((e) => e.type === 'ExecutionHandedOff')!.data).toMatchObject({ workerId: 'deployed' });
    expect(handed.some((e) => e.type === 'ExecutionAbandoned')).toBe(false);
    await until('the gauge to drop the action', async () => (await unofferedGauge('deploy.soon')) === undefined);
    await liveness.remove('deployed');
  });

  it('counts an action offered only to other namespaces as not offered: an execution of its own namespace is abandoned after the timeout, saying so', { timeout: 60_000 }, async () => {
    const { runtime, store, liveness } = cluster();
    await recordWorkerEvent(createWorkerRuntime(store), 'team-z-only', 'WorkerStarted', { actions: ['ns.only'], runtimes: ['node'], capacity: 4, namespaces: ['team-z'] });
    await liveness.beat({ workerId: 'team-z-only', actions: ['ns.only'], runtimes: ['node'], capacity: 4, inFlight: 0, draining: false }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'ns.only', input: null });
    await until('the gauge to count it', async () => (await unofferedGauge('ns.only')) === 1);
    const abandoned = await until('abandonment', async () => {
      const e = await events(executionId);
      return e.at(-1)?.type === 'ExecutionAbandoned' && e;
    });
    expect(abandoned.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionAbandoned']);
    expect(abandoned.at(-1)!.data).toEqual({
      reason: 'no live worker offered action "ns.only" to namespace "default" for 2s (BATON_NO_WORKER_TIMEOUT; the workers offering it run other namespaces only)',
    });
    await liveness.remove('team-z-only');
  });

  it('counts an action offered only by workers on the other transport as not offered, and says which transport they pull from', { timeout: 60_000 }, async () => {
    const { runtime, store, liveness } = cluster();
    await recordWorkerEvent(createWorkerRuntime(store), 'on-nats', 'WorkerStarted', { actions: ['other.transport'], runtimes: ['node'], capacity: 4 });
    await liveness.beat({ workerId: 'on-nats', actions: ['other.transport'], runtimes: ['node'], capacity: 4, inFlight: 0, draining: false, transport: 'nats' }, { starting: true });
    const { executionId } = await runtime.submit({ action: 'other.transport', input: null });
    await until('the gauge to count it', async () => (await unofferedGauge('other.transport')) === 1);
    const abandoned = await until('abandonment', async () => {
      const e = await events(executionId);
      return e.at(-1)?.type === 'ExecutionAbandoned' && e;
    });
    expect(abandoned.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionAbandoned']);
    expect(abandoned.at(-1)!.data).toEqual({
      reason: 'no live worker offered action "other.transport" on the postgres transport for 2s (BATON_NO_WORKER_TIMEOUT; the workers offering it pull from nats)',
    });
    await liveness.remove('on-nats');
  });
});
