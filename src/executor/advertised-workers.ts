// What the worker streams say, as the scheduling view needs it: each worker id's lifecycle
// status (its machine's state), and per action the policy the latest worker to start offering
// it advertised.
import { statusOf, type WorkerSnapshot, type WorkerStatus as MachineStatus } from '../../actors/worker.machine.ts';
import type { ActionPolicy, WorkerEvent } from '../../schemas/worker-events.ts';
import type { Change } from '../runtime/actor-runtime.ts';
import type { WorkerStatus } from './scheduling-entries.ts';

export type WorkerChange = Change<WorkerSnapshot, WorkerEvent>;

/** The executor's word for each state of the worker machine; undefined before the first WorkerStarted. */
function statusFor(state: MachineStatus): WorkerStatus | undefined {
  switch (state) {
    case 'Starting':
      return undefined;
    case 'Active':
      return 'active';
    case 'Draining':
      return 'draining';
    case 'Stopped':
      return 'stopped';
    case 'Lost':
      return 'lost';
    default: {
      const unknown: never = state;
      throw new Error(`no status for worker state ${String(unknown)}`);
    }
  }
}

export class AdvertisedWorkers {
  readonly #workers = new Map<string, WorkerStatus>();
  readonly #policies = new Map<string, ActionPolicy>();
  /** Actions some worker has advertised (with or without a policy). */
  readonly #known = new Set<string>();
  /** Per worker: the namespaces its latest WorkerStarted said it serves (none recorded: every namespace). */
  readonly #namespaces = new Map<string, readonly string[]>();

  /**
   * One change of worker `change.id`'s stream: the actions a WorkerStarted advertised, and
   * whether one started a new process under an id that had started before (`restarted`).
   */
  apply(change: WorkerChange): { advertised: string[]; restarted: boolean } {
    const status = statusFor(statusOf(change.after));
    if (status === undefined) this.#workers.delete(change.id);
    else this.#workers.set(change.id, status);
    const advertised: string[] = [];
    let restarted = false;
    for (const { event } of change.events) {
      if (event.type !== 'WorkerStarted') continue;
      if (event.data.namespaces) this.#namespaces.set(change.id, event.data.namespaces);
      else this.#namespaces.delete(change.id);
      // The first incarnation is 1: a later one is a new process under a known id.
      if (change.source !== 'loaded' && change.after.context.incarnation > 1) restarted = true;
      // The latest worker to start offering an action says its policy, or that it has none.
      const policies = event.data.policies ?? {};
      for (const action of new Set([...event.data.actions, ...Object.keys(policies)])) {
        const policy = policies[action];
        if (policy) this.#policies.set(action, policy);
        else this.#policies.delete(action);
        this.#known.add(action);
        advertised.push(action);
      }
    }
    return { advertised, restarted };
  }

  /** The worker's lifecycle status from its stream; undefined before its first event. */
  status(workerId: string): WorkerStatus | undefined {
    return this.#workers.get(workerId);
  }

  /** The namespaces the worker serves; undefined: every namespace. */
  namespacesOf(workerId: string): readonly string[] | undefined {
    return this.#namespaces.get(workerId);
  }

  /** The latest policy a worker advertised for the action, if any. */
  policyOf(action: string): ActionPolicy | undefined {
    return this.#policies.get(action);
  }

  /** Whether any worker has advertised the action yet. */
  knows(action: string): boolean {
    return this.#known.has(action);
  }

  /** Actions whose policy sets a concurrency limit. */
  *limitedActions(): Iterable<string> {
    for (const [action, p] of this.#policies) if (p.concurrency) yield action;
  }
}
