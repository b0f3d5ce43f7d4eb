// A dead letter whose execution moved on since (reclaimed and retried, or ended without it) is
// settled, not dead work; one its execution still waits on, or was abandoned for, is
// outstanding. Read from the event store for the dead letters each transport really holds
// (max-deliver 1: a message nak'ed once is a dead letter), and shown so by `baton dlq`.
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { describe, expect, inject, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { deadLetterAbandonReason } from '../../src/executor/monitor/runs.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { standingsOf } from '../../src/runtime/dead-letter-standing.ts';
import { connectNats, createNatsWorkTransport, deleteNatsWorkStreams } from '../../src/transport/nats/index.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkMessage, WorkTransport } from '../../src/transport/work-transport.ts';
import { runBaton } from '../support/cli.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { until } from '../support/until.ts';

const natsUrl = inject('natsUrl');
const W = 'w-dl-standing';
const later = () => new Date(Date.now() + 600_000).toISOString();

const messageFor = (executionId: string, attempt = 1): WorkMessage => ({
  messageId: randomUUID(),
  executionId,
  workerId: W,
  runtime: 'node',
  action: 'core.noop',
  attempt,
  handoffRevision: '1',
  publishedAt: new Date().toISOString(),
});

/** Publish, let the worker nak each once, and wait until every one is a dead letter. */
async function deadLetter(transport: WorkTransport, messages: WorkMessage[]): Promise<void> {
  const consumer = await transport.consume(W, (d) => d.nak(), { concurrency: 4 });
  try {
    await transport.publish(messages);
    await until('the messages to become dead letters', async () => (await Promise.all(messages.map((m) => transport.getDeadLetter(m.messageId)))).every(Boolean), 10_000);
  } finally {
    await consumer.stop();
  }
}

/** Executions in each place a dead letter can find its execution, each with its (real) dead letter. */
async function scene(runtime: ExecutionRuntime, transport: WorkTransport) {
  const handedOff = async () => {
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    await runtime.dispatch(executionId, { type: 'ExecutionHandedOff', data: { workerId: W, attempt: 1, deadline: later() }, by: 'executor' });
    return executionId;
  };
  const ids = { waiting: await handedOff(), abandoned: await handedOff(), retried: await handedOff(), ranAnyway: await handedOff(), unstored: randomUUID() };
  const m = Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, messageFor(id)])) as Record<keyof typeof ids, WorkMessage>;
  await deadLetter(transport, Object.values(m));

  // The executor's answer to a dead letter its execution still waits on (executor/monitor/runs.ts).
  const dead = (await transport.getDeadLetter(m.abandoned.messageId))!;
  await runtime.dispatch(ids.abandoned, [
    { type: 'OwnershipReclaimed', data: { reason: 'dead-letter', workerId: W, attempt: 1 }, by: 'executor' },
    { type: 'ExecutionAbandoned', data: { reason: deadLetterAbandonReason(dead) }, by: 'executor' },
  ]);
  // Reclaimed at its schedule-to-start deadline, retried on another worker, completed there.
  await runtime.dispatch(ids.retried, [
    { type: 'OwnershipReclaimed', data: { reason: 'schedule-to-start', workerId: W, attempt: 1 }, by: 'executor' },
    { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: new Date().toISOString(), reason: 'reclaimed' }, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w-other', attempt: 2, deadline: later() }, by: 'executor' },
  ]);
  await runtime.dispatch(ids.retried, { type: 'ExecutionStarted', data: { attempt: 2 }, by: 'worker:w-other' });
  await runtime.dispatch(ids.retried, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w-other' });
  // The same attempt ran to its end after all (a late ack raced the move).
  await runtime.dispatch(ids.ranAnyway, { type: 'ExecutionStarted', data: { attempt: 1 }, by: `worker:${W}` });
  await runtime.dispatch(ids.ranAnyway, { type: 'ExecutionCompleted', data: { result: null }, by: `worker:${W}` });
  return { ids, m };
}

const EXPECTED = (ids: Record<string, string>) => ({
  waiting: { standing: 'outstanding', reason: `its execution still waits on this message at worker ${W} (attempt 1, Scheduled)`, execution: { status: 'Scheduled', attempt: 1 } },
  abandoned: { standing: 'outstanding', reason: 'its execution was abandoned for it (attempt 1)', execution: { status: 'Abandoned', attempt: 1 } },
  retried: { standing: 'settled', reason: 'its execution moved on to attempt 2 (Completed)', execution: { status: 'Completed', attempt: 2 } },
  ranAnyway: { standing: 'settled', reason: 'its execution ended without it (Completed, attempt 1)', execution: { status: 'Completed', attempt: 1 } },
  unstored: { standing: 'settled', reason: 'its execution is not in the event store (archived or never stored)', execution: null },
  ids,
});

for (const kind of ['postgres', ...(natsUrl ? ['nats'] : [])] as const) {
  describe(`dead letters whose executions moved on (${kind} transport)`, () => {
    it('are settled, and those their executions wait on or were abandoned for are outstanding', { timeout: 60_000 }, async () => {
      const db: TestDatabase = await createTestDatabase({ max: 6 });
      const store = createPostgresEventStore(db.pool);
      const runtime = createExecutionRuntime(store);
      const suffix = Math.random().toString(36).slice(2, 8);
      let nc: NatsConnection | undefined;
      let transport: WorkTransport;
      if (kind === 'nats') {
        nc = await connectNats(natsUrl!);
        transport = await createNatsWorkTransport(nc, { streamName: `DLS_${suffix}`, subjectPrefix: `dls.${suffix}`, maxDeliver: 1 });
      } else {
        transport = createPostgresWorkTransport(db.pool, { maxDeliver: 1 });
      }
      try {
        const { ids, m } = await scene(runtime, transport);
        const listed = await transport.listDeadLetters({ limit: 100 });
        const standings = await standingsOf(runtime, listed);
        const byMessage = new Map(listed.map((d, i) => [d.messageId, standings[i]]));
        const { ids: _ids, ...expected } = EXPECTED(ids);
        for (const [k, want] of Object.entries(expected)) expect(byMessage.get(m[k as keyof typeof m].messageId), k).toEqual(want);

        if (kind === 'postgres') {
          // The CLI says the same, for the table and for --json.
          const json = await runBaton(['dlq', 'list', '--json', '--transport', 'postgres'], { databaseUrl: db.url });
          expect(json.code, json.stderr).toBe(0);
          const rows = JSON.parse(json.stdout) as { messageId: string; standing: string; standingReason: string; executionNow: unknown }[];
          for (const [k, want] of Object.entries(expected)) {
            expect(rows.find((r) => r.messageId === m[k as keyof typeof m].messageId), k).toMatchObject({ standing: want.standing, standingReason: want.reason, executionNow: want.execution });
          }
          const table = await runBaton(['dlq', 'list', '--transport', 'postgres'], { databaseUrl: db.url });
          expect(table.code, table.stderr).toBe(0);
          const line = (k: keyof typeof m) => table.stdout.split('\n').find((l) => l.startsWith(m[k].messageId))!;
          expect(line('retried')).toMatch(/ settled +Completed \(attempt 2\)$/);
          expect(line('waiting')).toMatch(/ outstanding +Scheduled \(attempt 1\)$/);
          expect(table.stderr).toContain('3 of these settled: their executions moved on without them');
          const show = await runBaton(['dlq', 'show', m.retried.messageId, '--transport', 'postgres'], { databaseUrl: db.url });
          expect(show.stdout).toMatch(/standing +settled: its execution moved on to attempt 2 \(Completed\)/);
        }
      } finally {
        await transport.close();
        if (nc) await deleteNatsWorkStreams(nc, { streamName: `DLS_${suffix}` });
        await nc?.close();
        await store.close();
        await db.drop();
      }
    });
  });
}
