// A work message the executor cannot publish (here: its NATS connection closed under it) is
// logged naming the execution and attempt it was for, both by the scheduling pass and by the
// monitor's re-publish, so an operator can tell which execution waits on it.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { startExecutor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime, recordWorkerEvent } from '../../src/runtime/worker-kind.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { createTestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const natsUrl = inject('natsUrl');

interface Line { msg: string; executionId?: string; attempt?: number; messageId?: string; workerId?: string; count?: number; executions?: unknown; err?: { message: string } }

describe.runIf(natsUrl)('a failed publish of handed-off work', () => {
  it('is logged with the executionId and attempt of the message, by the pass and by the monitor', { timeout: 30_000 }, async () => {
    const lines: Line[] = [];
    const log = pino({ level: 'error' }, new Writable({ write: (c: Buffer, _e, done) => (lines.push(JSON.parse(c.toString())), done()) }));
    const db = await createTestDatabase({ max: 6 });
    const store = createPostgresEventStore(db.pool);
    const runtime = createExecutionRuntime(store);
    const liveness = createLivenessStore(db.pool);
    const suffix = Math.random().toString(36).slice(2, 8);
    const streamName = `PFL_${suffix}`;
    const nc = await connectNats(natsUrl!);
    const transport = await createNatsWorkTransport(nc, { streamName, subjectPrefix: `pfl.${suffix}` });
    const executor = startExecutor({ store, transport, workers: liveness, log, republishAfterMs: 200, monitorEveryMs: 100, handleDeadLetters: false });
    try {
      await executor.ready;
      const workerId = `pfl-${suffix}`;
      const offer = { actions: ['pfl.work'], runtimes: ['node'], capacity: 4 };
      await recordWorkerEvent(createWorkerRuntime(store), workerId, 'WorkerStarted', offer);
      await liveness.beat({ workerId, ...offer, inFlight: 0, draining: false, transport: 'nats' }, { starting: true });
      // The broker is gone for this executor: every publish fails (a real NATS error, no stand-in).
      await deleteNatsWorkStreams(nc, { streamName });
      await nc.close();

      const { executionId } = await runtime.submit({ action: 'pfl.work', input: null });
      const named = (msg: string) => lines.find((l) => l.msg === msg && l.executionId === executionId);
      await until('both publish failures to be logged', () => !!named('publishing handed-off work failed; the monitor publishes it again') && !!named('monitor: re-publishing handoffs failed; will try again'), 10_000, {
        detail: () => JSON.stringify(lines, null, 1),
      });
      for (const msg of ['publishing handed-off work failed; the monitor publishes it again', 'monitor: re-publishing handoffs failed; will try again']) {
        const line = named(msg)!;
        expect(line).toMatchObject({ executionId, attempt: 1, workerId, count: 1, executions: [{ executionId, attempt: 1 }] });
        expect(line.messageId).toMatch(/^[0-9a-f-]{36}$/);
        expect(line.err!.message).toContain(`(execution ${executionId}, attempt 1, worker ${workerId})`);
      }
    } finally {
      await executor.stop();
      await transport.close();
      await store.close();
      await db.drop();
    }
  });
});
