// Eager dispatch: when the executor hands an execution to a worker in its own process (`baton dev`,
// an embedded worker, the benchmarks), that worker's ExecutionStarted goes into the same append as
// ExecutionHandedOff, and the worker runs it at once: no work message is
// published, claimed or acked. Temporal does the same for activities a workflow worker can run
// itself ("eager activity dispatch"). The history is the same two events, each decided by the
// machine in order (the worker's start is only valid once the handoff made it the owner), so
// ownership stays explicit; only the commit is shared.
//
// Why: the transport path costs, per execution, a publish, a claim and an ack, and ExecutionStarted
// in an append of its own after the message arrives: on the pickup path at light load that is two
// commits and two wake-ups more (hop trace, Postgres queue: handoff committed 2.75 ms, action
// starting 5.50 ms). A crash between the commit and the run leaves the execution Running under a
// worker that is gone, which the executor reclaims as for any dead worker (its heartbeat stops; a
// restart under the same id reclaims at once).
//
// What the worker decides stays the worker's: whether it takes the execution now (not while it
// drains, only an action and version it runs, not one with a cancel request) and the start's data
// (its start-to-close deadline, stall limit, version). Capacity is the executor's placement, as
// for work that goes through the transport: it hands a worker no more than its free slots.
import type { Logger } from 'pino';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { ActionRegistry } from '../actions/index.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { DEFAULT_ACTION_VERSION } from '../input/action-versions.ts';
import { traceRun } from '../observability/tracing.ts';
import type { Delivery, WorkMessage } from '../transport/work-transport.ts';
import { runDelivery, runStarted, startedData, type RunDeliveryDeps } from './run-delivery.ts';

export type StartedData = ReturnType<typeof startedData>;

/** What the executor knows of an execution it is about to hand to a worker of this process. */
export interface EagerCandidate {
  action: string;
  attempt: number;
  /** The action version the handoff names (absent: 1). */
  actionVersion: number | undefined;
  cancelRequested: boolean;
}

/** A worker host's side of eager dispatch. */
export interface EagerIntake {
  /** False once the worker drains: the executor places nothing more on it. */
  accepting(): boolean;
  /** ExecutionStarted's data if this worker starts `candidate` at once; undefined: through the transport. */
  start(candidate: EagerCandidate): StartedData | undefined;
  /** Run an execution whose handoff and start were stored together, leaving it `started`. */
  run(message: WorkMessage, started: { snapshot: ExecutionSnapshot; revision: bigint }): void;
}

/** A run whose action ended while its outcome is being stored. */
export interface EndedRun {
  workerId: string;
  executionId: string;
  /** Settles once the outcome is stored or given up. */
  recorded: Promise<void>;
  /** The runtime whose batcher (dispatch-batcher.ts) stores the outcome. */
  runtime: ExecutionRuntime;
}

/** The worker hosts of one process, by id: where the executor finds an intake for a placement. */
export class LocalWorkers {
  readonly #intakes = new Map<string, EagerIntake>();
  /** Ids whose worker host stopped in this process (and has not started again). */
  readonly #stopped = new Set<string>();
  readonly #endings = new Set<(run: EndedRun) => void>();
  #runs = 0;

  /** A run of one of these workers ended its action (src/executor/ending-runs.ts). */
  runEnded(run: EndedRun): void {
    for (const listener of this.#endings) listener(run);
  }

  /** Hears every runEnded; returns what stops it. */
  onRunEnded(listener: (run: EndedRun) => void): () => void {
    this.#endings.add(listener);
    return () => this.#endings.delete(listener);
  }

  /** Adds a worker's intake; returns what removes it (a stopped worker takes nothing). */
  register(workerId: string, intake: EagerIntake): () => void {
    this.#stopped.delete(workerId);
    const counted: EagerIntake = {
      accepting: () => intake.accepting(),
      start: (candidate) => intake.start(candidate),
      run: (message, started) => {
        this.#runs++;
        intake.run(message, started);
      },
    };
    this.#intakes.set(workerId, counted);
    return () => {
      if (this.#intakes.get(workerId) !== counted) return;
      this.#intakes.delete(workerId);
      this.#stopped.add(workerId);
    };
  }

  /**
   * Whether the executor may place work on `workerId`: false for a worker of this process that
   * drains or stopped, known here at once where its heartbeat says so only a moment later. A
   * handoff placed in that moment went to a worker that would never start it: it stayed Scheduled
   * until a reclaim, which spent an attempt that never ran (with maxAttempts 1: Abandoned).
   * Workers of other processes: true (their heartbeats decide).
   */
  takesWork(workerId: string): boolean {
    if (this.#stopped.has(workerId)) return false;
    return this.#intakes.get(workerId)?.accepting() ?? true;
  }

  /** Runs handed to these workers with their start so far (`baton bench` reports it). */
  get runs(): number {
    return this.#runs;
  }

  intake(workerId: string): EagerIntake | undefined {
    return this.#intakes.get(workerId);
  }
}

/** A delivery for a run that came without a message: nothing to ack, nothing to redeliver. */
function eagerDelivery(message: WorkMessage, deliveryCount = 1): Delivery {
  const settled = async () => undefined;
  return { message, deliveryCount, ack: settled, nak: settled, term: settled, working: settled };
}

/**
 * A worker host's intake: `deps` as its transport deliveries run with; `accepting` false once it
 * drains; `closed` true once its drain stopped waiting for runs. Runs still going are in `runs`
 * (the host's drain waits for them).
 */
export function eagerIntake(o: { deps: RunDeliveryDeps; actions: ActionRegistry; accepting: () => boolean; closed: () => boolean; runs: Set<Promise<void>>; log: Logger }): EagerIntake {
  return {
    accepting: o.accepting,
    start(c) {
      if (!o.accepting() || c.cancelRequested) return undefined;
      const action = o.actions.get(c.action);
      if (!action || (action.version ?? DEFAULT_ACTION_VERSION) !== (c.actionVersion ?? DEFAULT_ACTION_VERSION)) return undefined;
      return startedData(c.attempt, action, o.deps.startToCloseMs);
    },
    run(message, started) {
      const delivery = eagerDelivery(message);
      // Its start is stored: the attempt is this worker's and has begun, so it runs even if the
      // worker began to drain between the decision and the commit (the drain waits for it, as for
      // any run; handing it back would spend an attempt that never ran). Only once the drain has
      // stopped waiting, or when a run failed outside the action (its outcome could not be
      // stored), does the delivery path's check for an attempt of ours that no run holds hand the
      // baton back for a retry.
      const handBack = () => runDelivery(eagerDelivery(message, 2), o.deps, true);
      const run = (o.closed() ? handBack() : traceRun(delivery, () => runStarted(delivery, o.deps, started)).catch(handBack))
        .catch((err: unknown) => o.log.error({ err, executionId: message.executionId }, 'an eager run failed and could not hand its execution back; the executor reclaims it'))
        .finally(() => o.runs.delete(run));
      o.runs.add(run);
    },
  };
}
