// The worker machine: a worker id's lifecycle as its stream `worker-<id>` records it.
// Pure like the execution machine: no I/O, no clock; every time in the context is some
// event's metadata.occurredAt or data.
//
//   Starting ──WorkerStarted──▶ Active ──WorkerDraining──▶ Draining ──WorkerStopped──▶ Stopped
//                                 │  └────────WorkerStopped─────────────────────────▶ Stopped
//                                 └──WorkerLost (executor)──▶ Lost ◀──WorkerLost── Draining
//   WorkerStarted from Active, Draining, Stopped or Lost ──▶ Active (a new incarnation)
//
// No state is final. The stream belongs to the worker *id*, and a worker id outlives its
// processes: `baton worker --id w1` restarted by systemd or Kubernetes is the same worker
// again, so its WorkerStarted opens a new incarnation on the same stream instead of a
// new stream per process. A WorkerStarted while the stream still says Active or Draining
// means the previous process died without saying so (kill -9, OOM, power loss) before the
// executor noticed; `previousEnd: 'unannounced'` records that, so the executor knows the
// previous incarnation's executions are dead without waiting for heartbeats to go stale.
// (Two live processes sharing one id would also look like this; the worker host guards
// against that with the liveness table before it appends WorkerStarted.)
import { assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import { acceptedEventTypes, foldWith } from './fold.ts';
import { stepperOf } from './stepper.ts';
import { WorkerId, type ActorRef } from '../schemas/events.ts';
import type { WorkerEvent, WorkerEventType } from '../schemas/worker-events.ts';

/** Recorded in every appended event's metadata, so replay can tell which rules wrote it. */
export const WORKER_MACHINE_VERSION = '1';

export const EXECUTOR = 'executor' as const;

/** How the incarnation before the current one ended. */
export type IncarnationEnd = 'stopped' | 'lost' | 'unannounced';

export interface WorkerContext {
  workerId: string;
  /** 0 until the first WorkerStarted; +1 with every WorkerStarted. */
  incarnation: number;
  /** What the current incarnation announced (empty / 0 before the first start). */
  actions: string[];
  runtimes: string[];
  capacity: number;
  host: string | null;
  pid: number | null;
  /** null before the first WorkerStarted, otherwise the current incarnation's start. */
  startedAt: string | null;
  /** The current incarnation's drain, stop and loss; cleared by the next WorkerStarted. */
  drainingSince: string | null;
  drainReason: string | null;
  stoppedAt: string | null;
  stopReason: string | null;
  lostAt: string | null;
  lostReason: string | null;
  /** WorkerLost.lastHeartbeatAt: the last sign of life the executor had seen. */
  lastHeartbeatAt: string | null;
  /** How the previous incarnation ended; null for the first. */
  previousEnd: IncarnationEnd | null;
  /** occurredAt of the last accepted event; null for an empty stream. */
  updatedAt: string | null;
}

export interface WorkerInput {
  workerId: string;
}

/** Who may append `event` to worker `workerId`'s stream: the worker itself, except WorkerLost (the executor). */
export function expectedAppender(workerId: string, type: WorkerEventType): ActorRef {
  return type === 'WorkerLost' ? EXECUTOR : `worker:${workerId}`;
}

/** The ownership rule, the one place it is written. */
export function mayAppendWorkerEvent(context: WorkerContext, event: WorkerEvent): boolean {
  return event.metadata.by === expectedAppender(context.workerId, event.type);
}

function contextFor(workerId: string): WorkerContext {
  return {
    workerId,
    incarnation: 0,
    actions: [],
    runtimes: [],
    capacity: 0,
    host: null,
    pid: null,
    startedAt: null,
    drainingSince: null,
    drainReason: null,
    stoppedAt: null,
    stopReason: null,
    lostAt: null,
    lostReason: null,
    lastHeartbeatAt: null,
    previousEnd: null,
    updatedAt: null,
  };
}

type StartedFrom = 'Starting' | 'Active' | 'Draining' | 'Stopped' | 'Lost';

/** How the incarnation ended, judged from the state the next WorkerStarted arrives in. */
const endOf = (state: StartedFrom): IncarnationEnd | null =>
  state === 'Starting' ? null : state === 'Stopped' ? 'stopped' : state === 'Lost' ? 'lost' : 'unannounced';

// Every transition is guarded by the ownership rule.
const startedFrom = (from: StartedFrom) => ({
  guard: 'mayAppend' as const,
  target: 'Active' as const,
  actions: { type: 'start' as const, params: { from } },
});

export const workerMachine = setup({
  types: {
    context: {} as WorkerContext,
    events: {} as WorkerEvent,
    input: {} as WorkerInput,
  },
  guards: {
    mayAppend: ({ context, event }) => mayAppendWorkerEvent(context, event),
  },
  actions: {
    touch: assign({ updatedAt: ({ event }) => event.metadata.occurredAt }),
    /** A new incarnation: everything about the previous one is replaced, except how it ended. */
    start: assign(({ context, event }, params: { from: StartedFrom }) => {
      assertEvent(event, 'WorkerStarted');
      const { actions, runtimes, capacity, host, pid } = event.data;
      return {
        ...contextFor(context.workerId),
        incarnation: context.incarnation + 1,
        actions: [...actions],
        runtimes: [...runtimes],
        capacity,
        host: host ?? null,
        pid: pid ?? null,
        startedAt: event.metadata.occurredAt,
        previousEnd: endOf(params.from),
        updatedAt: event.metadata.occurredAt,
      };
    }),
    drain: assign(({ event }) => {
      assertEvent(event, 'WorkerDraining');
      return { drainingSince: event.metadata.occurredAt, drainReason: event.data.reason };
    }),
    stop: assign(({ event }) => {
      assertEvent(event, 'WorkerStopped');
      return { stoppedAt: event.metadata.occurredAt, stopReason: event.data.reason };
    }),
    lose: assign(({ event }) => {
      assertEvent(event, 'WorkerLost');
      return { lostAt: event.metadata.occurredAt, lostReason: event.data.reason, lastHeartbeatAt: event.data.lastHeartbeatAt };
    }),
  },
}).createMachine({
  id: 'worker',
  initial: 'Starting',
  context: ({ input }) => contextFor(input.workerId),
  states: {
    /** An empty stream: the process is coming up and has announced nothing yet. */
    Starting: {
      on: { WorkerStarted: startedFrom('Starting') },
    },
    /** Takes work. */
    Active: {
      on: {
        WorkerStarted: startedFrom('Active'),
        WorkerDraining: { guard: 'mayAppend', target: 'Draining', actions: ['touch', 'drain'] },
        // Nothing in flight (or nothing ever taken): no drain needed before a clean stop.
        WorkerStopped: { guard: 'mayAppend', target: 'Stopped', actions: ['touch', 'stop'] },
        WorkerLost: { guard: 'mayAppend', target: 'Lost', actions: ['touch', 'lose'] },
      },
    },
    /** Takes no new work; finishes or releases what it holds. */
    Draining: {
      on: {
        WorkerStarted: startedFrom('Draining'),
        WorkerStopped: { guard: 'mayAppend', target: 'Stopped', actions: ['touch', 'stop'] },
        WorkerLost: { guard: 'mayAppend', target: 'Lost', actions: ['touch', 'lose'] },
      },
    },
    /** Exited cleanly. A WorkerStarted brings the same id back. */
    Stopped: {
      on: { WorkerStarted: startedFrom('Stopped') },
    },
    /**
     * Declared gone by the executor, which reclaims its executions. A process that was only
     * partitioned and is still alive finds its execution appends refused (not the owner any
     * more) and must announce itself again with WorkerStarted, a new incarnation.
     */
    Lost: {
      on: { WorkerStarted: startedFrom('Lost') },
    },
  },
});

export type WorkerSnapshot = SnapshotFrom<typeof workerMachine>;
export type WorkerStatus = WorkerSnapshot['value'];

const acceptedTypes = acceptedEventTypes(workerMachine) as Map<WorkerStatus, readonly string[]>;

/** Every state, in definition order. */
export const workerStatuses: readonly WorkerStatus[] = [...acceptedTypes.keys()];

export function statusOf(snapshot: WorkerSnapshot): WorkerStatus {
  return snapshot.value;
}

/** Active or Draining: the stream says a process holds this id (liveness says whether it still beats). */
export function isLive(snapshot: WorkerSnapshot): boolean {
  const status = statusOf(snapshot);
  return status === 'Active' || status === 'Draining';
}

/** The machine for worker `workerId` before any event: Starting. Throws for an id no `worker:<id>` ref can carry. */
// Deciding and folding go through one stepper (stepper.ts), never a throwaway actor per step.
const step = stepperOf(workerMachine, { workerId: 'sample' });

export function startWorker(workerId: string): WorkerSnapshot {
  const r = WorkerId.safeParse(workerId);
  if (!r.success) throw new Error(`invalid worker id ${JSON.stringify(workerId)}: ${r.error.issues[0]?.message}`);
  return step.initial({ workerId });
}

export type WorkerRejection = 'NotOwner' | 'InvalidTransition';
export type WorkerDecision =
  | { ok: true; snapshot: WorkerSnapshot }
  | { ok: false; rejection: WorkerRejection; reason: string };

/**
 * Applies `event` if the machine takes it. A refusal is InvalidTransition when the state has
 * no transition for the event type (whoever sends it), otherwise NotOwner.
 */
export function decideWorker(snapshot: WorkerSnapshot, event: WorkerEvent): WorkerDecision {
  if (snapshot.can(event)) {
    return { ok: true, snapshot: step.next(snapshot, event) };
  }
  const status = statusOf(snapshot);
  if (!acceptedTypes.get(status)?.includes(event.type)) {
    return { ok: false, rejection: 'InvalidTransition', reason: `${event.type} is not allowed in state ${status}` };
  }
  const expected = expectedAppender(snapshot.context.workerId, event.type);
  return {
    ok: false,
    rejection: 'NotOwner',
    reason: `only ${expected} may append ${event.type} to worker ${snapshot.context.workerId}'s stream, not ${event.metadata.by}`,
  };
}

/**
 * Folds worker `workerId`'s stored history (possibly empty: Starting). Any refusal means
 * corruption or an incompatible machine change: it throws, naming the event's index, type
 * and the reason. Through the stepper, as foldExecution.
 */
export function foldWorker(workerId: string, events: readonly WorkerEvent[]): WorkerSnapshot {
  return foldWith(step, startWorker(workerId), events, (snapshot, event) => {
    const decision = decideWorker(snapshot, event);
    return decision.ok ? 'the machine did not take it' : `${decision.rejection}: ${decision.reason}`;
  });
}

/** Event types the machine could accept next, each only from its expectedAppender. */
export function allowedWorkerEventTypes(snapshot: WorkerSnapshot): WorkerEventType[] {
  return [...((acceptedTypes.get(statusOf(snapshot)) ?? []) as readonly WorkerEventType[])];
}

