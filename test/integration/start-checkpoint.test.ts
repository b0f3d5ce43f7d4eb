// A follower that starts from the read model's checkpoint (src/runtime/start-point.ts) loads the
// executions live there and follows the store after it: finished executions are never loaded, a
// restart continues the live ones, and a projector that lags (or never ran) costs only a longer
// catch-up, never a skipped execution.
import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.ts';
import type { Change } from '../../src/runtime/actor-runtime.ts';
import { cancelExecution } from '../../src/runtime/cancel.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { readStartPoint } from '../../src/runtime/start-point.ts';
import { createWorkerRuntime } from '../../src/runtime/worker-kind.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { startExecutor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore } from '../support/test-store.ts';

describe('starting from a checkpoint', () => {
  const t = useTestStore();
  let writer: ExecutionRuntime;
  beforeAll(async () => {
    writer = createExecutionRuntime(t.store);
  });

  const submit = async (n: number) => Promise.all(Array.from({ length: n }, async () => (await writer.submit({ action: 'core.noop', input: null })).executionId));
  const finish = async (ids: string[]) => {
    for (const id of ids) await cancelExecution(writer, id, 'done with it');
  };

  /** A host's follower as `startExecutorHost` makes it, and every execution change it hears. */
  async function startHost(o: { checkpoint: boolean }) {
    const executions = createExecutionRuntime(t.store, { followsStore: true });
    const workerStreams = createWorkerRuntime(t.store);
    const runtimes = [executions.actors, workerStreams, createWorkflowRuntime(t.store)];
    const heard: Change<unknown, unknown>[] = [];
    executions.onChange((c) => heard.push(c as Change<unknown, unknown>));
    const startFrom = o.checkpoint ? () => readStartPoint(t.db.pool, runtimes.map((r) => r.kind.streamPrefix)) : undefined;
    const follower = followActors({ store: t.store, runtimes, log: silentLogger(), who: 'test executor', ...(startFrom && { startFrom }) });
    // The executor's scheduling view is built from the same changes (no worker: nothing is placed).
    const executor = startExecutor({ store: t.store, actors: { executions, workerStreams, follower }, transport: createPostgresWorkTransport(t.db.pool), workers: createLivenessStore(t.db.pool), log: silentLogger(), handleDeadLetters: false });
    await executor.ready;
    const touched = new Set(heard.map((c) => c.id));
    return {
      executions,
      executor,
      heard,
      touched,
      follower: { stop: async () => (await follower.stop(), await executor.stop()) },
    };
  }

  it('follows from 0 while the projector has not run', { timeout: 30_000 }, async () => {
    const finished = await submit(3);
    await finish(finished);
    const host = await startHost({ checkpoint: true });
    try {
      // From 0 (no checkpoint): every stored execution reaches the host. Not necessarily by
      // `ready`: the catch-up read stops at the server's snapshot horizon (another test file's
      // open transaction), and the stream-order follow delivers the rest at once after.
      await expect.poll(() => finished.every((id) => host.heard.some((c) => c.id === id)), { timeout: 20_000 }).toBe(true);
    } finally {
      await host.follower.stop();
    }
  });

  it('loads only the executions live at the checkpoint, and a restart continues them', { timeout: 60_000 }, async () => {
    const finished = await submit(40);
    await finish(finished);
    const live = await submit(5);
    await catchUpFully(t.db.pool, t.store);

    const host = await startHost({ checkpoint: true });
    try {
      // Loaded once each (snapshot + tail), told to the listeners as a load; no finished one read.
      expect([...host.touched].sort()).toEqual([...live].sort());
      expect(host.heard.every((c) => c.source === 'loaded')).toBe(true);
      expect(host.executor.waiting()).toBe(live.length); // the executor's view holds each, waiting
      for (const id of live) expect(host.executions.cached(id)).toBeDefined();
      // The restarted host acts on them: a change after the checkpoint reaches it in order.
      await finish([live[0]!]);
      const deadline = Date.now() + 10_000;
      while (!host.heard.some((c) => c.id === live[0] && c.source === 'observed')) {
        if (Date.now() > deadline) throw new Error('the cancel of a live execution never reached the restarted host');
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(host.executions.cached(live[0]!)).toBeUndefined(); // final: it left memory
    } finally {
      await host.follower.stop();
    }

    // Without the checkpoint (as before), every finished one is folded at start.
    const fromZero = await startHost({ checkpoint: false });
    await fromZero.follower.stop();
    for (const id of finished) expect(fromZero.touched.has(id)).toBe(true);
  });

  it('tells the live executions in the order they were requested, though it loads many at once (the queue serves equal priorities first come, first served)', { timeout: 60_000 }, async () => {
    const inOrder: string[] = [];
    for (let i = 0; i < 60; i++) inOrder.push((await writer.submit({ action: 'core.noop', input: null })).executionId);
    await catchUpFully(t.db.pool, t.store);
    const host = await startHost({ checkpoint: true });
    try {
      const told = host.heard.map((c) => c.id).filter((id) => inOrder.includes(id));
      expect(told).toEqual(inOrder);
    } finally {
      await host.follower.stop();
      await finish(inOrder);
    }
  });

  it('a lagging projector costs a longer catch-up, never a skipped execution', { timeout: 60_000 }, async () => {
    const liveBefore = await submit(4);
    await catchUpFully(t.db.pool, t.store);
    // After the checkpoint, unprojected: two of the live ones end, new ones come (two end at once).
    await finish(liveBefore.slice(0, 2));
    const liveAfter = await submit(3);
    const endedAfter = await submit(2);
    await finish(endedAfter);

    const host = await startHost({ checkpoint: true });
    try {
      // What happened after the checkpoint comes by the follow: not necessarily by `ready` (its
      // catch-up read stops at the server's snapshot horizon, which another test file's open
      // transaction holds back; CI saw it), and at once after, in stream order.
      const done = (id: string) => host.heard.some((c) => c.id === id && c.after && (c.after as { status: string }).status === 'done');
      await expect
        .poll(() => liveAfter.every((id) => host.executions.cached(id) !== undefined) && [...liveBefore.slice(0, 2), ...endedAfter].every(done), { timeout: 20_000 })
        .toBe(true);
      for (const id of [...liveBefore.slice(2), ...liveAfter]) {
        const held = host.executions.cached(id);
        expect(held, id).toBeDefined();
        expect(held!.snapshot.value).toBe('Requested');
      }
      for (const id of [...liveBefore.slice(0, 2), ...endedAfter]) expect(host.executions.cached(id)).toBeUndefined();
      // Earlier tests' live ones are still waiting too (one of them was cancelled): 4 + 2 + 3.
      expect(host.executor.waiting()).toBe(4 + 2 + 3);
      // The ones that ended after the checkpoint were heard ending (the view forgets them).
      for (const id of endedAfter) expect(done(id)).toBe(true);
    } finally {
      await host.follower.stop();
    }
  });
});
