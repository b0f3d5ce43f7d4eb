// Handing work to a worker host of the same process directly, beside the transport. Where the
// executor and a worker share a process (`baton dev`, an embedded host, the benchmarks), a
// handoff's message used to go out to the transport and come back to that same process: a
// publish and a claim (two round trips, each ~0.5–1 ms on this machine) between the handoff's
// commit and the worker's ExecutionStarted. Now the executor also offers each stored handoff to
// the local worker it names, which runs it at once in a free slot of its consumer (counted against
// its capacity like any delivery), while the transport's copy is published as before.
//
// Nothing durable changes: the handoff is committed before either path sees it, the copy is still
// stored by the transport, and ExecutionStarted at the handoff's revision decides who runs it (a
// second start conflicts). The copy is settled as the local run settles its own delivery: acked
// once the run's outcome is committed (or its message was dropped); if the local run did not
// settle (it failed before deciding, or the process was stopping), the copy is run as any
// delivery is. A process that dies leaves the copy unacked, so it is redelivered as today.
import type { Logger } from 'pino';
import type { Delivery, WorkMessage, WorkTransport } from './work-transport.ts';

/** Takes a message for a local run; false when it cannot (no free slot, draining). */
export type LocalInbox = (message: WorkMessage) => boolean;

// By transport instance: a worker is offered only messages whose copies its own consumer gets.
const inboxes = new WeakMap<WorkTransport, Map<string, LocalInbox>>();

/** Register `workerId`'s inbox on `transport`; returns the unregister. */
export function openLocalInbox(transport: WorkTransport, workerId: string, inbox: LocalInbox): () => void {
  let byWorker = inboxes.get(transport);
  if (!byWorker) inboxes.set(transport, (byWorker = new Map()));
  byWorker.set(workerId, inbox);
  return () => {
    if (byWorker.get(workerId) === inbox) byWorker.delete(workerId);
  };
}

/** Offer each stored handoff to its worker if that worker runs in this process on `transport`; returns how many were taken. */
export function handOverLocally(transport: WorkTransport, messages: readonly WorkMessage[]): number {
  const byWorker = inboxes.get(transport);
  if (!byWorker || byWorker.size === 0) return 0;
  let taken = 0;
  for (const m of messages) if (byWorker.get(m.workerId)?.(m)) taken++;
  return taken;
}

/** Copies remembered at most: one whose publish failed for good never arrives, so the oldest are forgotten. */
const MAX_AWAITED_COPIES = 10_000;
const nothing = () => Promise.resolve();

/**
 * The worker's side: local runs, and the transport copies of their messages. `run` is how the
 * worker runs any delivery (it settles the delivery itself).
 */
export function localRuns(run: (delivery: Delivery) => Promise<void>, log: Logger) {
  /** Per message run here: whether the run settled its delivery (false: the copy must run), and the copy once it came. */
  const runs = new Map<string, { settled: Promise<boolean>; copy?: Delivery }>();

  return {
    /** Run `message` here, through `start` (the consumer's runBeside); false when it could not start. */
    take(message: WorkMessage, start: (task: () => Promise<void>) => boolean): boolean {
      let settled = false;
      let finish!: (settled: boolean) => void;
      const entry: { settled: Promise<boolean>; copy?: Delivery } = { settled: new Promise<boolean>((r) => (finish = r)) };
      const settle = () => {
        settled = true;
        return Promise.resolve();
      };
      const delivery: Delivery = {
        message,
        deliveryCount: 1,
        ack: settle,
        term: settle,
        nak: nothing, // the copy is delivered as usual
        // A long run's heartbeats keep the copy from being redelivered while it waits here.
        working: () => entry.copy?.working() ?? Promise.resolve(),
      };
      const task = () =>
        run(delivery)
          .catch((err: unknown) => log.warn({ err, executionId: message.executionId }, 'a run handed over in process failed; its transport copy runs instead'))
          .finally(() => finish(settled));
      if (runs.size >= MAX_AWAITED_COPIES) runs.delete(runs.keys().next().value!);
      runs.set(message.messageId, entry);
      if (start(task)) return true;
      runs.delete(message.messageId);
      return false;
    },
    /**
     * A delivery from the transport: if it is the copy of a message run here, settle it as that run
     * settled its own (ack) and return true; false for any other, or when the local run did not
     * settle (the caller runs it as usual).
     */
    async settleCopy(copy: Delivery): Promise<boolean> {
      const entry = runs.get(copy.message.messageId);
      if (!entry) return false;
      runs.delete(copy.message.messageId);
      entry.copy = copy;
      if (!(await entry.settled)) return false;
      await copy.ack();
      return true;
    },
  };
}
