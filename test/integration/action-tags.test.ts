// An action adds tags while it runs (ctx.tag), end to end with a real executor and worker on the
// Postgres queue: recorded as ExecutionTagged by the worker holding it, merged with the
// submitted tags, refused at once when bad (naming the tag), and folded by replay and the read
// model without divergence.
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { builtinActions, createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { replayHistory, RECORDED_MACHINES } from '../../src/replay/replay.ts';
import { catchUpFully } from '../support/read-model.ts';
import { useOneWorker } from '../support/one-worker.ts';

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
  const hosts = useOneWorker({ workerId: 'tagger', actions, max: 20 });

  it('records ExecutionTagged by the worker, merged with the submitted tags; a bad tag throws in the action, naming it', async () => {
    const { executionId } = await hosts.runtime.submit({ action: 'tags.charge', input: { invoice: 'inv-7' }, tags: { customer: 'c-42', stage: 'new' } });
    const events = await hosts.finished(executionId);
    expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionTagged', 'ExecutionCompleted']);
    expect(events[3]).toMatchObject({ data: { tags: { invoice: 'inv-7', stage: 'charged' } }, metadata: { by: 'worker:tagger', machineVersion: MACHINE_VERSION, stateAfter: 'Running' } });
    expect(refusals.get(executionId)).toMatch(/^tags\.not a key: tag key "not a key" may contain only/);
    const loaded = await hosts.runtime.load(executionId, { fresh: true });
    expect(loaded.snapshot.context.tags).toEqual({ customer: 'c-42', stage: 'charged', invoice: 'inv-7' });

    const history = events.map((e) => ({ eventId: e.eventId, revision: Number(e.revision), type: e.type, data: e.data, metadata: e.metadata, recordedAt: e.recordedAt.toISOString() }));
    expect(replayHistory(executionId, history, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });

    await catchUpFully(hosts.t.db.pool, hosts.t.store);
    const row = await hosts.t.db.pool.query(`SELECT tags FROM baton_read.executions WHERE tags @> $1::jsonb`, [JSON.stringify({ invoice: 'inv-7' })]);
    expect(row.rows).toEqual([{ tags: { customer: 'c-42', stage: 'charged', invoice: 'inv-7' } }]);
  });
});
