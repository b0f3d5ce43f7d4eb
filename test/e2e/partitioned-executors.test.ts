// Partitioned executors end to end (issue 18 item 4): three executors in this process, each
// with its own follower and partition leases, two worker hosts, real Postgres and NATS (the
// Postgres work queue when no NATS is reachable). Counted from the executors' own logs: how
// often an executor decided a handoff another had already made (a compare-and-swap conflict);
// counted from the events in commit order: the most executions holding a slot at once.
import { setTimeout as sleep } from 'node:timers/promises';
import type { NatsConnection } from 'nats';
import pino from 'pino';
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

const natsUrl = inject('natsUrl');
const nap = (ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal }).catch(() => undefined);
const limited = defineAction({ name: 'px.limited', input: z.object({ ms: z.number() }), concurrency: { limit: 3 }, run: ({ ms }, ctx) => nap(ms, ctx.signal) });
const keyed = defineAction({ name: 'px.keyed', input: z.object({ tenantId: z.string(), ms: z.number() }), concurrency: { limit: 1, key: 'tenantId' }, run: ({ ms }, ctx) => nap(ms, ctx.signal) });

const RELEASING = new Set(['ExecutionCompleted', 'ExecutionFailed', 'ExecutionCancelled', 'ExecutionTimedOut', 'ExecutionAbandoned', 'OwnershipReclaimed', 'OwnershipReleased']);

/** The most executions holding a slot at once (the handoff to a releasing event), per key. */
function maxHolding(events: StoredEvent[], ids: Map<string, string>): Map<string, number> {
  const holding = new Set<string>();
  const now = new Map<string, number>();
  const most = new Map<string, number>();
  for (const e of events) {
    const id = e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const key = ids.get(id);
    if (key === undefined) continue;
    if (e.type === 'ExecutionHandedOff' && !holding.has(id)) {
      holding.add(id);
      now.set(key, (now.get(key) ?? 0) + 1);
      most.set(key, Math.max(most.get(key) ?? 0, now.get(key)!));
    } else if (RELEASING.has(e.type) && holding.delete(id)) now.set(key, now.get(key)! - 1);
  }
  return most;
}

describe(`three partitioned executors (${natsUrl ? 'nats' : 'postgres'} transport)`, () => {
  const t = useTestStore({
    max: 30,
    beforeClose: async () => {
      await Promise.all(workers.map((w) => w.stop()));
      for (const [i, e] of executors.entries()) {
        await e.stop();
        await leases[i]!.stop();
      }
      await transport?.close();
      if (nc) await deleteNatsWorkStreams(nc, { streamName: `PX_${run}` });
      await nc?.close();
    },
  });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let nc: NatsConnection | undefined;
  const executors: Executor[] = [];
  const leases: PartitionLeases[] = [];
  const workers: WorkerHost[] = [];
  const run = Math.random().toString(36).slice(2, 8);
  /** Handoffs an executor decided but found already decided by another (its compare-and-swap lost). */
  let conflicts = 0;
  const log = pino({ level: 'debug' }, { write: (line: string) => void (line.includes('not scheduled: state moved on') && conflicts++) });

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    if (natsUrl) {
      nc = await connectNats(natsUrl);
      transport = await createNatsWorkTransport(nc, { streamName: `PX_${run}`, subjectPrefix: `px.${run}` });
    } else {
      transport = createPostgresWorkTransport(t.db.pool);
    }
    const beats = createExecutorBeats(t.db.pool);
    for (const i of [1, 2, 3]) {
      const l = startPartitionLeases({ store: t.store, beats, log, executorId: `px-${run}-${i}`, staleAfterMs: 3_000, beatEveryMs: 250, settleMs: 300 });
      leases.push(l);
      executors.push(startExecutor({ store: t.store, transport, workers: liveness, log, partitions: l }));
    }
    await Promise.all(executors.map((e) => e.ready));
    for (const i of [1, 2]) {
      workers.push(await startWorkerHost({ workerId: `px-${run}-w${i}`, store: t.store, runtime, transport, liveness, actions: createActionRegistry([limited, keyed]), capacity: 8, log }));
    }
  });

  it('split the partitions fairly, then decide each handoff once and never pass a limit of 3', async () => {
    // Bounded: the three settle on 6 + 6 + 4 of the 16 partitions.
    const deadline = Date.now() + 10_000;
    while (leases.map((l) => l.held().length).sort().join() !== '4,6,6') {
      if (Date.now() > deadline) throw new Error(`partitions not balanced: ${leases.map((l) => l.held().length).join(', ')}`);
      await sleep(50);
    }
    const ids = new Map<string, string>();
    for (let i = 0; i < 150; i += 50) {
      for (const r of await Promise.all(Array.from({ length: 50 }, (_, j) => runtime.submit({ action: 'px.limited', input: { ms: 10 + ((i + j) % 23) } })))) ids.set(r.executionId, 'limited');
    }
    const tenants = ['t-a', 't-b', 't-c', 't-d', 't-e', 't-f'];
    for (let i = 0; i < 8; i++) {
      const batch = await Promise.all(tenants.map((tenantId) => runtime.submit({ action: 'px.keyed', input: { tenantId, ms: 10 + (i % 7) } })));
      batch.forEach((r, k) => ids.set(r.executionId, tenants[k]!));
    }
    await untilCompleted(t.db.pool, [...ids.keys()], 40_000);
    const events = await allEvents(t.store, [EXECUTION_STREAM_PREFIX]);
    const handoffs = events.filter((e) => e.type === 'ExecutionHandedOff' && ids.has(e.streamId.slice(EXECUTION_STREAM_PREFIX.length))).length;
    const most = maxHolding(events, ids);
    const deciders = new Set(leases.filter((l) => l.held().length > 0).map((l) => l.executorId));
    console.info(`3 executors, ${ids.size} executions, ${handoffs} handoffs: ${conflicts} compare-and-swap conflicts (${(conflicts / handoffs).toFixed(3)} per handoff); most holding at once ${JSON.stringify(Object.fromEntries(most))}`);
    expect(deciders.size).toBe(3);
    expect(handoffs).toBeGreaterThanOrEqual(ids.size);
    expect(conflicts).toBe(0);
    expect(most.get('limited')).toBe(3);
    for (const t of tenants) expect(most.get(t), t).toBe(1);
  }, 60_000);
});
