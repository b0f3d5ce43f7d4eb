// An executor crashed after appending a handoff and before publishing it: the executors that
// follow the event store publish it, duplicates are absorbed, and the work runs exactly once.
import { describe, expect, inject, it } from 'vitest';
import pino from 'pino';
import type { NatsConnection } from 'nats';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startExecutor } from '../../src/executor/executor.ts';
import { startWorkerHost } from '../../src/worker/worker-host.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { waitForFinal } from '../../src/cli/wait.ts';
import { statusOf } from '../../actors/execution.machine.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { createTestDatabase } from '../support/test-db.ts';

const natsUrl = inject('natsUrl');
const log = pino({ level: 'silent' });

for (const kind of ['postgres', ...(natsUrl ? ['nats'] : [])] as const) {
  describe(`state before queue (${kind} transport)`, () => {
    it('publishes a committed but unpublished handoff, once, even with two executors catching up', async () => {
      const db = await createTestDatabase({ max: 20 });
      const store = createPostgresEventStore(db.pool);
      const runtime = createExecutionRuntime(store);
      const liveness = createLivenessStore(db.pool);
      let nc: NatsConnection | undefined;
      let transport: WorkTransport;
      const suffix = Math.random().toString(36).slice(2, 8);
      if (kind === 'nats') {
        nc = await connectNats(natsUrl!);
        transport = await createNatsWorkTransport(nc, { streamName: `SBQ_${suffix}`, subjectPrefix: `sbq.${suffix}` });
      } else {
        transport = createPostgresWorkTransport(db.pool);
      }
      const workerId = `sbq-${suffix}`;
      const worker = await startWorkerHost({ workerId, store, runtime, transport, liveness, actions: createActionRegistry(builtinActions), capacity: 4, log });
      try {
        // "Executor A": appends the handoff, then crashes before publishing.
        const { executionId } = await runtime.submit({ action: 'core.echo', input: { n: 1 } });
        await runtime.dispatch(executionId, [
          { type: 'ExecutionHandedOff', data: { workerId, attempt: 1, deadline: new Date(Date.now() + 30_000).toISOString() }, by: 'executor' },
        ]);
        // Executors B and C start, catch up, and each re-publishes what was never published.
        const executors = [1, 2].map(() => startExecutor({ store, transport, workers: liveness, log, republishAfterMs: 300 }));
        const done = await waitForFinal(store, runtime, executionId, 15_000);
        expect(done && statusOf(done.snapshot)).toBe('Completed');
        expect(done!.snapshot.context.result).toEqual({ n: 1 });
        await new Promise((r) => setTimeout(r, 1_000)); // room for a duplicate delivery to show up
        const events = await store.readStream(executionStreamId(executionId));
        expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
        await Promise.all(executors.map((e) => e.stop()));
      } finally {
        await worker.stop();
        await transport.close();
        if (nc) await deleteNatsWorkStreams(nc, { streamName: `SBQ_${suffix}` });
        await nc?.close();
        await store.close();
        await db.drop();
      }
    }, 30_000);
  });
}
