// An executor, workflow orchestrators and a worker in this process, over a fresh database and
// (when reachable) NATS: what the workflow tests run against. Everything is stopped and dropped
// by close().
import { jsonValue } from '../../src/input/schemas.ts';
import type { NatsConnection } from 'nats';
import { builtinActions, createActionRegistry, defineAction, type ActionRegistry } from '../../src/actions/index.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { connectNats, createNatsWorkTransport } from '../../src/transport/nats/index.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { startOrchestrator, type Orchestrator } from '../../src/workflow/orchestrator.ts';
import { loadWorkflow, type LoadedWorkflow } from '../../src/workflow/workflow-stream.ts';
import { createTestDatabase, type TestDatabase } from './test-db.ts';

/** An action no worker offers: its executions wait in Requested (before any handoff) forever. */
export const UNSERVED = defineAction({ name: 'test.unserved', input: jsonValue(), run: () => null });

/** What the service checks definitions against: the built-ins plus the unserved action. */
export const workflowActions: ActionRegistry = createActionRegistry([...builtinActions, UNSERVED]);

export interface WorkflowCluster {
  db: TestDatabase;
  store: PostgresEventStore;
  runtime: ExecutionRuntime;
  orchestrators: Orchestrator[];
  startOrchestrator(): Orchestrator;
  close(): Promise<void>;
}

export async function startWorkflowCluster(o: { natsUrl: string | null; orchestrators?: number; capacity?: number }): Promise<WorkflowCluster> {
  const log = silentLogger();
  const db = await createTestDatabase({ max: 30 });
  const store = createPostgresEventStore(db.pool);
  const runtime = createExecutionRuntime(store);
  const liveness = createLivenessStore(db.pool);
  const suffix = Math.random().toString(36).slice(2, 8);
  let nc: NatsConnection | undefined;
  let transport: WorkTransport;
  if (o.natsUrl) {
    nc = await connectNats(o.natsUrl);
    transport = await createNatsWorkTransport(nc, { streamName: `WF_${suffix}`, subjectPrefix: `wf.${suffix}` });
  } else {
    transport = createPostgresWorkTransport(db.pool);
  }
  const executor: Executor = startExecutor({ store, transport, workers: liveness, log });
  const worker: WorkerHost = await startWorkerHost({
    workerId: `wf-${suffix}`,
    store,
    runtime,
    transport,
    liveness,
    actions: createActionRegistry(builtinActions),
    capacity: o.capacity ?? 16,
    log,
    heartbeatIntervalMs: 1_000,
  });
  const orchestrators: Orchestrator[] = [];
  const start = () => {
    const orchestrator = startOrchestrator({ store, log, sweepEveryMs: 0 });
    orchestrators.push(orchestrator);
    return orchestrator;
  };
  for (let i = 0; i < (o.orchestrators ?? 1); i++) start();
  await Promise.all([executor.ready, ...orchestrators.map((x) => x.ready)]);
  return {
    db,
    store,
    runtime,
    orchestrators,
    startOrchestrator: start,
    async close() {
      await Promise.all(orchestrators.map((x) => x.stop()));
      await worker.stop('test over');
      await executor.stop();
      await transport.close();
      if (nc) {
        const jsm = await nc.jetstreamManager();
        for (const name of [`WF_${suffix}`, `WF_${suffix}_DLQ`]) await jsm.streams.delete(name).catch(() => undefined);
        await nc.close();
      }
      await store.close();
      await db.drop();
    },
  };
}

/** Poll until `check` returns a value (not undefined), or fail after `timeoutMs` with `what`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The workflow once it has ended (Completed, Failed or Cancelled). */
export const workflowEnded = (store: PostgresEventStore, workflowId: string, timeoutMs?: number): Promise<LoadedWorkflow> =>
  eventually(`workflow ${workflowId} to end`, async () => {
    const w = await loadWorkflow(store, workflowId);
    return w.snapshot.status === 'done' ? w : undefined;
  }, timeoutMs);

/**
 * Every event in the store, in commit order (the order readAll delivers). Waits first for the
 * transactions running now to end: hosts follow in `stream` order and may have acted on events
 * that readAll still holds back behind another (even another database's) open transaction.
 */
export async function allEvents(store: PostgresEventStore, streamPrefixes?: string[]): Promise<StoredEvent[]> {
  await store.settled();
  const out: StoredEvent[] = [];
  let after = START;
  for (;;) {
    const batch = await store.readAll({ after, limit: 5_000, ...(streamPrefixes && { streamPrefixes }) });
    if (batch.length === 0) return out;
    out.push(...batch);
    after = batch[batch.length - 1]!.globalPosition;
  }
}

/** The bad definitions every surface (service, CLI, GraphQL) must refuse, each with what the refusal names. */
export const badWorkflows: { name: string; definition: unknown; expect: RegExp }[] = [
  {
    name: 'a cycle, with its path',
    definition: { steps: [{ id: 'a', action: 'core.noop', dependsOn: ['c'] }, { id: 'b', action: 'core.noop', dependsOn: ['a'] }, { id: 'c', action: 'core.noop', dependsOn: ['b'] }] },
    expect: /steps: dependency cycle: a → b → c → a/,
  },
  { name: 'an unknown action', definition: { steps: [{ id: 'a', action: 'billing.nope' }] }, expect: /steps\.0\.action: unknown action "billing\.nope"/ },
  { name: 'a missing dependency', definition: { steps: [{ id: 'a', action: 'core.noop', dependsOn: ['ghost'] }] }, expect: /steps\.0\.dependsOn\.0: no step "ghost" in this workflow/ },
  { name: 'a self-reference', definition: { steps: [{ id: 'a', action: 'core.noop', dependsOn: ['a'] }] }, expect: /steps\.0\.dependsOn\.0: step "a" depends on itself/ },
  { name: 'duplicate ids', definition: { steps: [{ id: 'a', action: 'core.noop' }, { id: 'a', action: 'core.echo' }] }, expect: /steps\.1\.id: "a" is already the id of steps\.0/ },
  {
    // QA: stored rounded (…567000) where a submission's input is refused.
    name: 'a whole number JSON cannot hold exactly in a step input',
    // eslint-disable-next-line no-loss-of-precision
    definition: { steps: [{ id: 'a', action: 'core.echo', input: { n: 12345678901234567891 } }] },
    expect: /steps\.0\.input\.n: is a whole number past ±9007199254740991, which JSON numbers cannot hold exactly/,
  },
];
