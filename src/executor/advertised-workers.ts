// What the worker streams say, as the scheduling index needs it: each worker id's lifecycle
// status, and per action the policy the latest worker to start offering it advertised.
import type { StoredEvent } from '../eventstore/event-store.ts';
import type { ActionPolicy } from '../../schemas/worker-events.ts';
import type { WorkerStatus } from './scheduling-entries.ts';

const WORKER_STATUS: Record<string, WorkerStatus> = {
  WorkerStarted: 'active',
  WorkerDraining: 'draining',
  WorkerStopped: 'stopped',
  WorkerLost: 'lost',
};

export class AdvertisedWorkers {
  readonly #workers = new Map<string, WorkerStatus>();
  readonly #policies = new Map<string, ActionPolicy>();
  /** Actions some worker has advertised (with or without a policy). */
  readonly #known = new Set<string>();

  /**
   * Apply one event of worker `workerId`'s stream. Undefined for an event that is not a
   * lifecycle change; otherwise the status before it, and the actions a WorkerStarted advertised.
   */
  apply(workerId: string, event: StoredEvent): { before: WorkerStatus | undefined; advertised: string[] } | undefined {
    const status = WORKER_STATUS[event.type];
    if (!status) return undefined;
    const before = this.#workers.get(workerId);
    this.#workers.set(workerId, status);
    if (event.type !== 'WorkerStarted') return { before, advertised: [] };
    // The latest worker to start offering an action says its policy, or that it has none.
    const data = event.data as { actions?: string[]; policies?: Record<string, ActionPolicy> };
    const policies = data.policies ?? {};
    const advertised = [...new Set([...(data.actions ?? []), ...Object.keys(policies)])];
    for (const action of advertised) {
      const policy = policies[action];
      if (policy) this.#policies.set(action, policy);
      else this.#policies.delete(action);
      this.#known.add(action);
    }
    return { before, advertised };
  }

  /** The worker's lifecycle status from its stream; undefined before its first event. */
  status(workerId: string): WorkerStatus | undefined {
    return this.#workers.get(workerId);
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
