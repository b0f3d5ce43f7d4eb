// Two worker fleets of one action, version 1 (no version declared) and version 2, side by side
// during a deploy, with a real executor, worker hosts, Postgres event store and work queue in
// this process: pinned submissions run on their fleet, unpinned ones on the newest, a retry stays
// on its pinned version, a pin nobody offers waits with a reason, and every history replays.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId, type ExecutionEvent } from '../../schemas/events.ts';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore, type LivenessStore } from '../../src/liveness/liveness-store.ts';
import { waitingReasonNow } from '../../src/liveness/waiting-reason.ts';
import { silentLogger } from '../../src/log.ts';
import { RECORDED_MACHINES } from '../../src/replay/replay.ts';
import { replayStore } from '../../src/replay/replay-store.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { useTestStore } from '../support/test-store.ts';

const RETRY = { maxAttempts: 3, initialIntervalMs: 10, multiplier: 1, maxIntervalMs: 10 };

/** One version of the deploy's actions: `demo.greet` says who ran it; `demo.flaky` fails its first attempt. */
function actionsAt(version: 1 | 2) {
  const v = version === 2 ? { version } : {}; // version 1 declares nothing: unversioned is version 1
  return createActionRegistry([
    defineAction({ name: 'demo.greet', ...v, input: z.null(), run: () => ({ version }) }),
    defineAction({
      name: 'demo.flaky',
      ...v,
      retry: RETRY,
      input: z.null(),
      run: (_input, ctx) => {
        if (ctx.attempt === 1) throw new Error(`version ${version} fails its first attempt`);
        return { version };
      },
    }),
  ]);
}

describe('two worker fleets, v1 and v2, side by side', () => {
  const t = useTestStore({
    max: 20,
    beforeClose: async () => {
      for (const w of [...fleets.v1!, ...fleets.v2!]) await w.stop('test over');
      await executor?.stop();
      await transport?.close();
    },
  });
  let runtime: ExecutionRuntime;
  let liveness: LivenessStore;
  let transport: WorkTransport;
  let executor: Executor;
  const fleets: Record<string, WorkerHost[]> = { v1: [], v2: [] };
  const log = silentLogger();

  async function startFleet(version: 1 | 2): Promise<void> {
    for (const n of [1, 2]) {
      fleets[`v${version}`]!.push(
        await startWorkerHost({ workerId: `v${version}-${n}`, store: t.store, runtime: createExecutionRuntime(t.store), transport, liveness, actions: actionsAt(version), capacity: 4, log, heartbeatIntervalMs: 1_000 }),
      );
    }
  }

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    liveness = createLivenessStore(t.db.pool);
    transport = createPostgresWorkTransport(t.db.pool);
    executor = startExecutor({ store: t.store, transport, workers: liveness, log });
    await executor.ready;
  });

  const history = async (id: string) => (await t.store.readStream(executionStreamId(id))).map((e) => ({ type: e.type, data: e.data, by: (e.metadata as { by: string }).by }) as ExecutionEvent['data'] & { type: string; data: any; by: string });
  const finished = (id: string) =>
    eventually(`execution ${id} to finish`, async () => {
      const s = (await runtime.load(id, { fresh: true })).snapshot;
      return s.status === 'done' ? s : undefined;
    }, 30_000);
  /** Per attempt: the worker it ran on and the version its handoff and start named (absent: 1). */
  async function attempts(id: string) {
    const events = await history(id);
    const handoffs = events.filter((e) => e.type === 'ExecutionHandedOff');
    const starts = events.filter((e) => e.type === 'ExecutionStarted');
    return handoffs.map((h, i) => ({ worker: h.data.workerId as string, handedOff: h.data.actionVersion ?? 1, ran: starts[i]?.data.actionVersion ?? 1 }));
  }

  it('before the deploy, an unpinned execution runs on the only version offered: 1', { timeout: 60_000 }, async () => {
    await startFleet(1);
    const { executionId } = await runtime.submit({ action: 'demo.greet', input: null });
    expect((await finished(executionId)).context.result).toEqual({ version: 1 });
    expect(await history(executionId)).not.toContainEqual(expect.objectContaining({ data: expect.objectContaining({ actionVersion: expect.anything() }) }));
  });

  it('during the deploy, pinned executions go to their fleet and unpinned ones to the newest', { timeout: 60_000 }, async () => {
    await startFleet(2);
    const submit = (actionVersion?: number) => runtime.submit({ action: 'demo.greet', input: null, ...(actionVersion !== undefined && { actionVersion }) });
    const ids = { v1: [] as string[], v2: [] as string[], newest: [] as string[] };
    for (let i = 0; i < 6; i++) {
      ids.v1.push((await submit(1)).executionId);
      ids.v2.push((await submit(2)).executionId);
      ids.newest.push((await submit()).executionId);
    }
    for (const [group, expected] of [['v1', 1], ['v2', 2], ['newest', 2]] as const) {
      for (const id of ids[group]) {
        const s = await finished(id);
        expect(statusOf(s), `${group} ${id}`).toBe('Completed');
        expect(s.context.result).toEqual({ version: expected });
        const [only] = await attempts(id);
        expect(only).toMatchObject({ worker: expect.stringMatching(new RegExp(`^v${expected}-`)), handedOff: expected, ran: expected });
      }
    }
  });

  it('a retry stays on its pinned version though a newer one is live; an unpinned one retries on the newest', { timeout: 60_000 }, async () => {
    const pinned = (await runtime.submit({ action: 'demo.flaky', input: null, actionVersion: 1 })).executionId;
    const unpinned = (await runtime.submit({ action: 'demo.flaky', input: null })).executionId;
    expect((await finished(pinned)).context.result).toEqual({ version: 1 });
    expect(await attempts(pinned)).toEqual([
      { worker: expect.stringMatching(/^v1-/), handedOff: 1, ran: 1 },
      { worker: expect.stringMatching(/^v1-/), handedOff: 1, ran: 1 },
    ]);
    expect((await finished(unpinned)).context.result).toEqual({ version: 2 });
    expect((await attempts(unpinned)).map((a) => a.ran)).toEqual([2, 2]);
  });

  it('a pin no live worker offers waits with a reason, and runs once its fleet is back', { timeout: 60_000 }, async () => {
    const v3 = (await runtime.submit({ action: 'demo.greet', input: null, actionVersion: 3 })).executionId;
    for (const w of fleets.v1!.splice(0)) await w.stop('deploy done');
    const v1 = (await runtime.submit({ action: 'demo.greet', input: null, actionVersion: 1 })).executionId;
    await new Promise((r) => setTimeout(r, 1_500)); // several scheduling passes
    for (const [id, version] of [[v3, 3], [v1, 1]] as const) {
      const s = (await runtime.load(id, { fresh: true })).snapshot;
      expect(statusOf(s)).toBe('Requested');
      const reason = await waitingReasonNow(liveness, { status: statusOf(s), action: 'demo.greet', pinnedVersion: s.context.pinnedVersion, retryAt: s.context.retryAt }, 30_000);
      expect(reason).toBe(`no live worker offers action "demo.greet" at version ${version} (pinned)`);
    }
    await startFleet(1); // rolled back: the v1 pin runs, the v3 one still waits
    expect((await finished(v1)).context.result).toEqual({ version: 1 });
    expect(statusOf((await runtime.load(v3, { fresh: true })).snapshot)).toBe('Requested');
    await runtime.dispatch(v3, { type: 'ExecutionCancelled', data: { reason: 'no such version' }, by: 'executor' });
  });

  it('every history replays against the machine versions that wrote it with no divergence', async () => {
    const summary = await replayStore({ store: t.store, target: RECORDED_MACHINES });
    expect(summary.streams).toBeGreaterThan(20);
    expect(summary.divergences).toEqual([]);
  });
});
