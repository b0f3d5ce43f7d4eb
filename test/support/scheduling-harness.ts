// The executor's scheduling view fed as the executor feeds it: stored events folded once by the
// actor runtimes, whose changes the view applies. No database: the events come in order from
// revision 0, so the runtimes never need to read a stream. `ready` is what one pass would place
// with unlimited workers offering every action (placement.ts), in order.
import { randomUUID } from 'node:crypto';
import type { EventStore, StoredEvent } from '../../src/eventstore/event-store.ts';
import { plan } from '../../src/executor/placement.ts';
import { SchedulingView } from '../../src/executor/scheduling-view.ts';
import type { WaitingExecution } from '../../src/executor/waiting-queue.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { createWorkerRuntime } from '../../src/runtime/worker-kind.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { WorkerEvent } from '../../schemas/worker-events.ts';
import { ev } from './execution-paths.ts';

const noStore = new Proxy({} as EventStore, {
  get: (_, name) => () => {
    throw new Error(`the scheduling harness has no store (${String(name)})`);
  },
});

export function schedulingHarness() {
  const executions = createExecutionRuntime(noStore);
  const workers = createWorkerRuntime(noStore);
  const view = new SchedulingView();
  let last: { unblocks: boolean; terminal: string | null } = { unblocks: false, terminal: null };
  executions.onChange((c) => (last = view.applyExecution(c)));
  workers.onChange((c) => void (last = { unblocks: view.applyWorker(c), terminal: null }));
  const revisions = new Map<string, number>();
  const actions = new Set<string>();
  let position = 0n;
  /** Where each (stream, revision) was stored: an event delivered again comes from the same place. */
  const positions = new Map<string, bigint>();

  async function append(streamId: string, event: ExecutionEvent | WorkerEvent, o: { revision?: number } = {}) {
    const revision = o.revision ?? (revisions.get(streamId) ?? -1) + 1;
    revisions.set(streamId, Math.max(revision, revisions.get(streamId) ?? -1));
    const at = `${streamId}@${revision}`;
    const globalPosition = positions.get(at) ?? ++position;
    positions.set(at, globalPosition);
    const stored: StoredEvent = { eventId: randomUUID(), streamId, revision: BigInt(revision), globalPosition, type: event.type, data: event.data, metadata: event.metadata, recordedAt: new Date(1_000) };
    last = { unblocks: false, terminal: null };
    await (streamId.startsWith('worker-') ? workers : executions).observe(stored);
    return { ...last, stored };
  }

  return {
    view,
    executions,
    /** The next event of an execution (its stream's next revision). */
    next: (id: string, event: ExecutionEvent) => append(`execution-${id}`, event),
    /** An event again at a revision already applied (a duplicate delivery): changes nothing. */
    again: (id: string, event: ExecutionEvent, revision: number) => append(`execution-${id}`, event, { revision }),
    worker: (workerId: string, event: WorkerEvent) => append(`worker-${workerId}`, event),
    async requested(o: { priority?: number; maxAttempts?: number; action?: string; input?: unknown } = {}) {
      const id = randomUUID();
      const action = o.action ?? 'core.noop';
      actions.add(action);
      await append(`execution-${id}`, ev.requested({ action, input: (o.input ?? null) as never, maxAttempts: o.maxAttempts ?? 3, ...(o.priority !== undefined && { priority: o.priority }) }));
      return id;
    },
    ready(now = 0): WaitingExecution[] {
      const everyone = [{ workerId: 'everyone', actions: [...actions], capacity: 1_000_000 }];
      return plan({ now, queue: view.queue, workers: everyone, loadOf: () => 0, freeSlots: (a, b) => view.freeSlots(a, b) }).map((p) => p.execution);
    },
  };
}

/** A WorkerStarted as a worker announces itself. */
export const workerStarted = (workerId: string, actions: string[], policies: WorkerEvent extends never ? never : Record<string, unknown> = {}, capacity = 100): WorkerEvent =>
  ({ type: 'WorkerStarted', data: { actions, runtimes: ['node'], capacity, ...(Object.keys(policies).length > 0 && { policies }) }, metadata: { by: `worker:${workerId}`, occurredAt: new Date(0).toISOString() } }) as WorkerEvent;
