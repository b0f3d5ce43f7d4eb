// A worker in the executor's process starts its handoffs without waiting for the transport
// (src/transport/local-handoff.ts), on both transports: here every publish is held until the run
// is over, so the work can only have started through the hand-over. The transport's copy is then
// delivered all the same and acked without running the action again.
import { describe, expect, inject, it } from 'vitest';
import pino from 'pino';
import { z } from 'zod';
import type { NatsConnection } from 'nats';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import type { WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';
import { startExecutor } from '../../src/executor/executor.ts';
import { startWorkerHost } from '../../src/worker/worker-host.ts';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import { waitForFinal } from '../../src/cli/wait.ts';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { createTestDatabase } from '../support/test-db.ts';

const natsUrl = inject('natsUrl');
const log = pino({ level: 'silent' });

for (const kind of ['postgres', ...(natsUrl ? ['nats'] : [])] as const) {
  describe(`hand-over in process (${kind} transport)`, () => {
    it('runs a handoff of its own process before the transport has it, and settles the copy without running it again', async () => {
      const db = await createTestDatabase({ max: 20 });
      const store = createPostgresEventStore(db.pool);
      const runtime = createExecutionRuntime(store);
      const liveness = createLivenessStore(db.pool);
      let nc: NatsConnection | undefined;
      let inner: WorkTransport;
      const suffix = Math.random().toString(36).slice(2, 8);
      if (kind === 'nats') {
        nc = await connectNats(natsUrl!);
        inner = await createNatsWorkTransport(nc, { streamName: `LH_${suffix}`, subjectPrefix: `lh.${suffix}` });
      } else {
        inner = createPostgresWorkTransport(db.pool);
      }
      // Publishes wait until released: nothing reaches the worker through the transport before that.
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const published: WorkMessage[] = [];
      const transport: WorkTransport = {
        ...inner,
        publish: async (messages) => {
          await released;
          published.push(...messages);
          await inner.publish(messages);
        },
      };
      const runs: string[] = [];
      const actions = createActionRegistry([defineAction({ name: 'lh.count', input: z.object({ n: z.number() }), run: (input, ctx) => (runs.push(ctx.executionId), input) })]);
      const workerId = `lh-${suffix}`;
      const worker = await startWorkerHost({ workerId, store, runtime, transport, liveness, actions, capacity: 4, log });
      const executor = startExecutor({ store, transport, workers: liveness, log });
      try {
        await executor.ready;
        const { executionId } = await runtime.submit({ action: 'lh.count', input: { n: 7 } });
        const done = await waitForFinal(store, runtime, executionId, 10_000);
        expect(done && statusOf(done.snapshot)).toBe('Completed');
        expect(done!.snapshot.context.result).toEqual({ n: 7 });
        expect(published).toEqual([]); // it ran before any publish
        release();
        // The copy arrives and is acked, not run: the queue empties and the action ran once.
        const deadline = Date.now() + 10_000;
        while (published.length === 0 || (await inner.depth(workerId)) > 0) {
          if (Date.now() > deadline) throw new Error('the copy was never settled');
          await new Promise((r) => setTimeout(r, 20));
        }
        expect(published.map((m) => m.executionId)).toEqual([executionId]);
        await new Promise((r) => setTimeout(r, 300)); // room for a second run to show up
        expect(runs).toEqual([executionId]);
        const events = await store.readStream(executionStreamId(executionId));
        expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
      } finally {
        release();
        await worker.stop();
        await executor.stop();
        await transport.close();
        if (nc) await deleteNatsWorkStreams(nc, { streamName: `LH_${suffix}` });
        await nc?.close();
        await store.close();
        await db.drop();
      }
    }, 30_000);
  });
}
