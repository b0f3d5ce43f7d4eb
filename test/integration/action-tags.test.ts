// An action adds tags while it runs (ctx.tag), end to end with a real executor and worker on the
// Postgres queue: recorded as ExecutionTagged by the worker holding it, merged with the
// submitted tags, refused at once when bad (naming the tag), and folded by replay and the read
// model without divergence.
import pino from 'pino';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { replayHistory, RECORDED_MACHINES } from '../../src/replay/replay.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useTestStore } from '../support/test-store.ts';

const log = pino({ level: 'silent' });
const refusals = new Map<string, string>();

const actions = createActionRegistry([
  ...builtinActions,
  defineAction({
    name: 'tags.charge',
    input: z.object({ invoice: z.string() }),
    async run(input, ctx) {
      await ctx.tag({ invoice: input.invoice, stage: 'charged' });
      try {
        await ctx.tag({ 'not a key': 'x' });
      } catch (err) {
        refusals.set(ctx.executionId, (err as Error).message);
      }
      return { ok: true };
    },
  }),
]);

describe('ctx.tag', () => {
  const t = useTestStore({
    max: 20,
    beforeClose: async () => {
      await worker?.stop();
      await executor?.stop();
      await transport?.close();
    },
  });
  let runtime: ExecutionRuntime;
  let transport: WorkTransport;
  let executor: Executor;
  let worker: WorkerHost;

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
    const liveness = createLivenessStore(t.db.pool);
    transport = createPostgresWorkTransport(t.db.pool);
    executor = startExecutor({ store: t.store, transport, workers: liveness, log, monitorEveryMs: 50 });
    await executor.ready;
    worker = await startWorkerHost({ workerId: 'tagger', store: t.store, runtime, transport, liveness, actions, capacity: 2, log, heartbeatIntervalMs: 200 });
  });

  async function finished(id: string): Promise<StoredEvent[]> {
    const end = Date.now() + 15_000;
    for (;;) {
      const events = await t.store.readStream(executionStreamId(id));
      if (events.at(-1)?.type === 'ExecutionCompleted' || events.at(-1)?.type === 'ExecutionFailed') return events;
      if (Date.now() > end) throw new Error(`not finished: ${events.map((e) => e.type).join(' → ')}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it('records ExecutionTagged by the worker, merged with the submitted tags; a bad tag throws in the action, naming it', async () => {
    const { executionId } = await runtime.submit({ action: 'tags.charge', input: { invoice: 'inv-7' }, tags: { customer: 'c-42', stage: 'new' } });
    const events = await finished(executionId);
    expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionTagged', 'ExecutionCompleted']);
    expect(events[3]).toMatchObject({ data: { tags: { invoice: 'inv-7', stage: 'charged' } }, metadata: { by: 'worker:tagger', machineVersion: MACHINE_VERSION, stateAfter: 'Running' } });
    expect(refusals.get(executionId)).toMatch(/^tags\.not a key: tag key "not a key" may contain only/);
    const loaded = await runtime.load(executionId, { fresh: true });
    expect(loaded.snapshot.context.tags).toEqual({ customer: 'c-42', stage: 'charged', invoice: 'inv-7' });

    const history = events.map((e) => ({ eventId: e.eventId, revision: Number(e.revision), type: e.type, data: e.data, metadata: e.metadata, recordedAt: e.recordedAt.toISOString() }));
    expect(replayHistory(executionId, history, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });

    await catchUpFully(t.db.pool, t.store);
    const row = await t.db.pool.query(`SELECT tags FROM baton_read.executions WHERE tags @> $1::jsonb`, [JSON.stringify({ invoice: 'inv-7' })]);
    expect(row.rows).toEqual([{ tags: { customer: 'c-42', stage: 'charged', invoice: 'inv-7' } }]);
  });
});
