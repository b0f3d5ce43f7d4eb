// Concurrency limits and priorities end to end: a real executor (and again three partitioned
// executors, src/executor/partitions/) and real worker hosts (in this process) against a real Postgres and NATS (the Postgres work queue when no NATS is reachable).
// Every claim is checked from the events, read back in the store's commit order: a slot is
// held from the handoff (or, counted the way a user sees it, from ExecutionStarted) until
// the execution's final event or the baton's return.
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import pino from 'pino';
import { Registry } from 'prom-client';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createExecutorBeats } from '../../src/executor/partitions/executor-beats.ts';
import { startPartitionLeases, type PartitionLeases } from '../../src/executor/partitions/leases.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { useTestStore } from '../support/test-store.ts';
import { untilCompleted } from '../support/until-completed.ts';
import { allEvents } from '../support/workflow-cluster.ts';

const log = pino({ level: 'silent' });
const natsUrl = inject('natsUrl');

/** Sleeps `ms`, and stops when the run is aborted. */
const nap = (ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal }).catch(() => undefined);
const limited = defineAction({ name: 'cc.limited', input: z.object({ ms: z.number() }), concurrency: { limit: 3 }, run: ({ ms }, ctx) => nap(ms, ctx.signal) });
const keyed = defineAction({
  name: 'cc.keyed',
  input: z.object({ tenantId: z.string(), ms: z.number() }),
  concurrency: { limit: 1, key: 'tenantId' },
  run: ({ ms }, ctx) => nap(ms, ctx.signal),
});
const ordered = defineAction({ name: 'cc.ordered', input: z.object({ ms: z.number() }), run: ({ ms }, ctx) => nap(ms, ctx.signal) });

/** Events that end an execution's hold on a slot: its final event, or the baton's return. */
const RELEASING = new Set([
  'ExecutionCompleted',
  'ExecutionFailed', // final, or retryable: either way the baton is back with the executor
  'ExecutionCancelled',
  'ExecutionTimedOut',
  'ExecutionAbandoned',
  'OwnershipReclaimed',
  'OwnershipReleased',
]);

/**
 * The most executions holding at once, overall and per key, counting from `from`
 * (ExecutionHandedOff or ExecutionStarted) to a releasing event. Events in commit order.
 */
function maxConcurrent(events: StoredEvent[], ids: Map<string, string>, from: string): { overall: number; perKey: Map<string, number> } {
  const holding = new Set<string>();
  const now = new Map<string, number>();
  const perKey = new Map<string, number>();
  let overall = 0;
  for (const e of events) {
    const id = e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const key = ids.get(id);
    if (key === undefined) continue;
    if (e.type === from && !holding.has(id)) {
      holding.add(id);
      now.set(key, (now.get(key) ?? 0) + 1);
      perKey.set(key, Math.max(perKey.get(key) ?? 0, now.get(key)!));
      overall = Math.max(overall, holding.size);
    } else if (RELEASING.has(e.type) && holding.delete(id)) {
      now.set(key, now.get(key)! - 1);
    }
  }
  return { overall, perKey };
}

describe.each([1, 3])(`concurrency limits and priorities, %i executor(s) (${natsUrl ? 'nats' : 'postgres'} transport)`, (executorCount) => {
  const t = useTestStore({
    max: 30,
    beforeClose: async () => {
      await Promise.all(workers.map((w) => w.stop()));
      for (const e of executors) await e.stop();
      for (const l of leases) await l.stop();
      await transport?.close();
      if (nc) await deleteNatsWorkStreams(nc, { streamName: `CC_${run}` });
      await nc?.close();
    },
  });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let nc: NatsConnection | undefined;
  const executors: Executor[] = [];
  const leases: PartitionLeases[] = [];
  const registry = new Registry();
  const workers: WorkerHost[] = [];
  const run = Math.random().toString(36).slice(2, 8);

  const gauge = async (name: string, action: string) =>
    (await registry.getSingleMetric(name)!.get()).values.find((v) => v.labels.action === action)?.value;

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    if (natsUrl) {
      nc = await connectNats(natsUrl);
      transport = await createNatsWorkTransport(nc, { streamName: `CC_${run}`, subjectPrefix: `cc.${run}` });
    } else {
      transport = createPostgresWorkTransport(t.db.pool);
    }
    if (executorCount === 1) executors.push(startExecutor({ store: t.store, transport, workers: liveness, log, registry }));
    else {
      // Each decides the buckets of the partitions it leases; the first one's /metrics is sampled (every view counts every slot).
      const beats = createExecutorBeats(t.db.pool);
      for (let i = 1; i <= executorCount; i++) {
        const l = startPartitionLeases({ store: t.store, beats, log, executorId: `cc-${run}-x${i}`, staleAfterMs: 3_000, beatEveryMs: 250, settleMs: 300 });
        leases.push(l);
        executors.push(startExecutor({ store: t.store, transport, workers: liveness, log, partitions: l, ...(i === 1 && { registry }) }));
      }
      const deadline = Date.now() + 10_000;
      while (leases.some((l) => l.held().length === 0)) {
        if (Date.now() > deadline) throw new Error(`partitions not split: ${leases.map((l) => l.held().length).join(', ')}`);
        await sleep(50);
      }
    }
    await Promise.all(executors.map((e) => e.ready));
    // Two workers offering the limited actions, each with room for more than the limit.
    for (const i of [1, 2]) {
      workers.push(await startWorkerHost({ workerId: `cc-${run}-${i}`, store: t.store, runtime, transport, liveness, actions: createActionRegistry([limited, keyed]), capacity: 8, log }));
    }
  });

  it('never runs more than 3 executions of an action limited to 3, across 2 workers, and completes all 200', async () => {
    const t0 = performance.now();
    const ids = new Map<string, string>();
    for (let i = 0; i < 200; i += 50) {
      const batch = await Promise.all(Array.from({ length: 50 }, (_, j) => runtime.submit({ action: 'cc.limited', input: { ms: 20 + ((i + j) % 31) } })));
      for (const r of batch) ids.set(r.executionId, 'all');
    }
    // /metrics, sampled while it runs: the slots the executor's index counts never pass the limit.
    let maxSlots = 0;
    let maxQueued = 0;
    await untilCompleted(t.db.pool, [...ids.keys()], 25_000, async () => {
      maxSlots = Math.max(maxSlots, (await gauge('baton_action_slots_held', 'cc.limited')) ?? 0);
      maxQueued = Math.max(maxQueued, (await gauge('baton_action_queued', 'cc.limited')) ?? 0);
    });
    const ms = performance.now() - t0;
    expect(await gauge('baton_action_concurrency_limit', 'cc.limited')).toBe(3);
    expect(maxSlots).toBeGreaterThan(0);
    expect(maxSlots).toBeLessThanOrEqual(3);
    expect(maxQueued).toBeGreaterThan(3);

    const events = await allEvents(t.store, [EXECUTION_STREAM_PREFIX]);
    const started = maxConcurrent(events, ids, 'ExecutionStarted');
    const scheduled = maxConcurrent(events, ids, 'ExecutionHandedOff');
    // For the log: how long a freed slot stays free (a completion to the next handoff).
    const gaps: number[] = [];
    let freedAt: number | undefined;
    for (const e of events) {
      if (!ids.has(e.streamId.slice(EXECUTION_STREAM_PREFIX.length))) continue;
      if (e.type === 'ExecutionCompleted') freedAt ??= e.recordedAt.getTime();
      else if (e.type === 'ExecutionHandedOff' && freedAt !== undefined) [gaps[gaps.length], freedAt] = [e.recordedAt.getTime() - freedAt, undefined];
    }
    gaps.sort((a, b) => a - b);
    console.info(
      `cc.limited: 200 executions in ${Math.round(ms)} ms; most running at once ${started.overall}, most holding a slot ${scheduled.overall}, ` +
        `/metrics slots max ${maxSlots}; slot free → next scheduled p50 ${gaps[gaps.length >> 1]} ms, p90 ${gaps[Math.floor(gaps.length * 0.9)]} ms`,
    );
    expect(started.overall).toBe(3); // the limit binds, and is never passed
    expect(scheduled.overall).toBe(3);
    // Every one completed, on both workers.
    const last = new Map<string, string>();
    for (const e of events) last.set(e.streamId, e.type);
    for (const id of ids.keys()) expect(last.get(`${EXECUTION_STREAM_PREFIX}${id}`)).toBe('ExecutionCompleted');
    const ranOn = new Set(events.filter((e) => e.type === 'ExecutionStarted' && ids.has(e.streamId.slice(EXECUTION_STREAM_PREFIX.length))).map((e) => e.metadata.by));
    expect(ranOn.size).toBe(2);
  }, 30_000);

  it('limits per key: one at a time per tenant, tenants in parallel', async () => {
    const t0 = performance.now();
    const ids = new Map<string, string>();
    const tenants = ['t-a', 't-b', 't-c'];
    for (let i = 0; i < 20; i++) {
      const batch = await Promise.all(tenants.map((tenantId) => runtime.submit({ action: 'cc.keyed', input: { tenantId, ms: 20 + (i % 11) } })));
      batch.forEach((r, k) => ids.set(r.executionId, tenants[k]!));
    }
    await untilCompleted(t.db.pool, [...ids.keys()], 25_000);
    const ms = performance.now() - t0;
    const events = await allEvents(t.store, [EXECUTION_STREAM_PREFIX]);
    for (const from of ['ExecutionStarted', 'ExecutionHandedOff']) {
      const { overall, perKey } = maxConcurrent(events, ids, from);
      console.info(`cc.keyed (${from}): 60 executions in ${Math.round(ms)} ms; most at once ${overall}; per tenant ${JSON.stringify(Object.fromEntries(perKey))}`);
      expect(overall, from).toBeGreaterThan(1);
      expect([...perKey.values()], from).toEqual([1, 1, 1]);
    }
    expect(await gauge('baton_action_concurrency_limit', 'cc.keyed')).toBe(1);
  }, 30_000);

  it('starts higher-priority executions first: 5 high ones submitted after 14 low ones, while the first runs', async () => {
    const worker = await startWorkerHost({ workerId: `cc-${run}-ordered`, store: t.store, runtime, transport, liveness, actions: createActionRegistry([ordered]), capacity: 1, log });
    workers.push(worker);
    const first = (await runtime.submit({ action: 'cc.ordered', input: { ms: 800 }, priority: 0 })).executionId;
    // Wait (bounded) until the first one runs: the worker's only slot is taken.
    const deadline = Date.now() + 10_000;
    while (!(await t.store.readStream(`${EXECUTION_STREAM_PREFIX}${first}`)).some((e) => e.type === 'ExecutionStarted')) {
      if (Date.now() > deadline) throw new Error('the first execution did not start within 10 s');
      await sleep(10);
    }
    const low: string[] = [];
    const high: string[] = [];
    for (let i = 0; i < 14; i++) low.push((await runtime.submit({ action: 'cc.ordered', input: { ms: 10 }, priority: 0 })).executionId);
    for (let i = 0; i < 5; i++) high.push((await runtime.submit({ action: 'cc.ordered', input: { ms: 10 }, priority: 10 })).executionId);
    await untilCompleted(t.db.pool, [first, ...low, ...high], 20_000);

    const events = await allEvents(t.store, [EXECUTION_STREAM_PREFIX]);
    const ofStream = (e: StoredEvent) => e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const all = new Set([first, ...low, ...high]);
    // The test means something only if every submission was in before the first run ended.
    const firstDone = events.findIndex((e) => ofStream(e) === first && e.type === 'ExecutionCompleted');
    const lastRequested = Math.max(...events.map((e, i) => (all.has(ofStream(e)) && e.type === 'ExecutionRequested' ? i : -1)));
    expect(lastRequested, 'the first run ended before all were submitted: lengthen its sleep').toBeLessThan(firstDone);
    const startOrder = events.filter((e) => e.type === 'ExecutionStarted' && all.has(ofStream(e))).map(ofStream);
    expect(startOrder).toEqual([first, ...high, ...low]); // by priority, then first come first served
  }, 30_000);
});
