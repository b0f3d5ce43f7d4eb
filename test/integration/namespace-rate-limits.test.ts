// Namespace rate limits against the real event store: two executors in one process, one
// namespace limited to 5 per second (BATON_NAMESPACE_RATE_LIMIT), its executions spread over two
// actions that have no limit of their own. By the handoffs' recorded times, the namespace never
// gets more than 5 in any second, every execution still runs, the default namespace is not held
// back, and the grants are on the namespace's bucket stream.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { RATE_LIMIT_STREAM_PREFIX } from '../../schemas/rate-limit-events.ts';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { namespaceRateBucket } from '../../src/executor/namespace-rate-limits.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { asRateLimitEvent } from '../../src/runtime/rate-bucket-kind.ts';
import { rateBucketsOf, replayRateBucket } from '../../src/runtime/rate-buckets.ts';
import { namespaceRateLimitReason } from '../../src/liveness/rate-limit-wait.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { useTestStore } from '../support/test-store.ts';
import { allEvents, eventually } from '../support/workflow-cluster.ts';
import { busiestSecond, tokenTimes } from '../support/busiest-second.ts';

const RATE = 5;
const one = defineAction({ name: 'test.ns-one', input: z.object({ n: z.number() }), run: () => null });
const two = defineAction({ name: 'test.ns-two', input: z.object({ n: z.number() }), run: () => null });

describe('namespace rate limits across executors', () => {
  const t = useTestStore({
    max: 20,
    beforeClose: async () => {
      for (const w of workers) await w.stop('test over');
      for (const e of executors) await e.stop();
      await transport?.close();
    },
  });
  let runtime: ExecutionRuntime;
  let transport: WorkTransport;
  const executors: Executor[] = [];
  const workers: WorkerHost[] = [];

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    transport = createPostgresWorkTransport(t.db.pool);
    const liveness = createLivenessStore(t.db.pool);
    const log = silentLogger();
    for (let i = 0; i < 2; i++) executors.push(startExecutor({ store: t.store, transport, workers: liveness, log, namespaceRateLimits: { 'team-a': { perSecond: RATE } } }));
    workers.push(await startWorkerHost({ workerId: 'nsrl-0', store: t.store, runtime, transport, liveness, actions: createActionRegistry([...builtinActions, one, two]), capacity: 32, log, heartbeatIntervalMs: 1_000 }));
    await Promise.all(executors.map((e) => e.ready));
  }, 30_000);

  const handoffTimes = async (ids: Set<string>) =>
    (await allEvents(t.store, [EXECUTION_STREAM_PREFIX]))
      .filter((e) => e.type === 'ExecutionHandedOff' && ids.has(e.streamId.slice(EXECUTION_STREAM_PREFIX.length)))
      .map((e) => Date.parse((e.metadata as { occurredAt: string }).occurredAt));

  it('never hands off more than 5 of the namespace in any second, across its actions, and runs them all', async () => {
    const limited = new Set<string>();
    const free = new Set<string>();
    for (let n = 0; n < 15; n++) {
      limited.add((await runtime.submit({ action: n % 2 ? 'test.ns-one' : 'test.ns-two', input: { n }, namespace: 'team-a' })).executionId);
      free.add((await runtime.submit({ action: 'test.ns-one', input: { n } })).executionId);
    }
    const all = new Set([...limited, ...free]);
    // What `baton status` and GraphQL waitingReason say meanwhile, read from the bucket's stream.
    const reasons = new Set<string>();
    const limits = { 'team-a': { perSecond: RATE } };
    await eventually('every execution to end', async () => {
      const reason = await namespaceRateLimitReason(rateBucketsOf(t.store), 'team-a', limits, Date.now());
      if (reason) reasons.add(reason.replace(/at \S+$/, 'at …'));
      for (const id of all) if (!isFinal((await runtime.load(id)).snapshot)) return undefined;
      return true;
    }, 30_000);
    expect([...reasons]).toEqual([`rate limited: namespace "team-a" allows ${RATE} per second; next token at …`]);
    expect(await namespaceRateLimitReason(rateBucketsOf(t.store), 'default', limits, Date.now())).toBeNull();
    for (const id of all) expect(statusOf((await runtime.load(id)).snapshot)).toBe('Completed');

    const times = await handoffTimes(limited);
    expect(times.length).toBeGreaterThanOrEqual(15);
    // Never passed. (Reached is asked of the grants below: a handoff is stamped a moment after its
    // token, and on a loaded machine the busiest second of handoffs held 4 once in CI.)
    expect(busiestSecond(times)).toBeLessThanOrEqual(RATE);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(2_000); // 15 at 5 per second
    // The default namespace has no limit: its 15 are not spread out by team-a's.
    expect(busiestSecond(await handoffTimes(free))).toBeGreaterThan(RATE);

    const stream = `${RATE_LIMIT_STREAM_PREFIX}${namespaceRateBucket('team-a')}`;
    const grants = (await allEvents(t.store, [RATE_LIMIT_STREAM_PREFIX])).filter((e) => e.streamId === stream).map(asRateLimitEvent);
    expect(grants.reduce((n, g) => n + g.data.count, 0)).toBeGreaterThanOrEqual(times.length);
    // With 15 waiting, the limiter granted the whole rate, and never more, in its busiest second.
    expect(busiestSecond(tokenTimes(grants))).toBe(RATE);
    expect(replayRateBucket(namespaceRateBucket('team-a'), await t.store.readStream(stream)).divergences).toEqual([]);
  }, 45_000);
});
