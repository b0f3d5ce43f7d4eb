// Why an execution waits in Requested, told from what exists: its own state (a retry's backoff)
// and the workers' heartbeats now (is any live worker offering its action?). Nothing is kept by
// hand for it, so `baton status` and the GraphQL API say the same from the same facts.
import { namespaceOr } from '../input/namespace.ts';
import type { ActionOffer, LivenessStore } from './liveness-store.ts';

export interface ExecutionWaitState {
  status: string;
  action: string;
  /** Its namespace; absent or null: the default. */
  namespace?: string | null;
  /** The action version the submission pinned: only workers offering it count. */
  pinnedVersion?: number | null;
  /** ISO: a retry may not be scheduled before it. */
  retryAt: string | null | undefined;
}

/**
 * `retry backoff until <time>`, `no live worker offers action "x"` (with how many that do are
 * draining, which other namespaces the ready ones serve, or which other transport they pull
 * from), or null: not waiting in Requested,
 * or waiting only for a free worker slot or concurrency slot, which is the normal queue.
 */
export function waitingReason(e: ExecutionWaitState, offer: ActionOffer | undefined, now: number): string | null {
  if (e.status !== 'Requested') return null;
  if (e.retryAt && Date.parse(e.retryAt) > now) return `retry backoff until ${new Date(e.retryAt).toISOString()}`;
  const namespace = namespaceOr(e.namespace ?? undefined);
  if (offer && (offer.readyEverywhere > 0 || offer.readyNamespaces.includes(namespace))) return null;
  const elsewhere = offer?.readyNamespaces ?? [];
  const draining = offer?.draining ?? 0;
  const version = e.pinnedVersion != null ? ` at version ${e.pinnedVersion} (pinned)` : '';
  // Workers that run only other namespaces' executions (`--namespaces`) would never take it.
  if (elsewhere.length > 0) {
    return `no live worker offers action "${e.action}"${version} to namespace "${namespace}" (the ones that do serve only ${elsewhere.map((n) => `"${n}"`).join(', ')})`;
  }
  // Workers on the other transport never see the work (the executor places none on them).
  const other = offer?.otherTransport;
  if (other) {
    const them = other.workers === 1 ? `the 1 that does pulls` : `the ${other.workers} that do pull`;
    return `no live worker offers action "${e.action}"${version} on the ${other.executors.join(' or ')} transport the executors publish to (${them} from ${other.theirs.join(' or ')}: start workers and executors with the same --transport)`;
  }
  return `no live worker offers action "${e.action}"${version}${draining > 0 ? ` (${draining} draining)` : ''}`;
}

/** What to ask the liveness table for: the action, or `name@version` for a pinned execution. */
export const offerKey = (e: Pick<ExecutionWaitState, 'action' | 'pinnedVersion'>): string => (e.pinnedVersion != null ? `${e.action}@${e.pinnedVersion}` : e.action);

/** The reason for one execution now, asking the liveness table only when it waits in Requested. */
export async function waitingReasonNow(liveness: Pick<LivenessStore, 'offering'>, e: ExecutionWaitState, staleAfterMs: number): Promise<string | null> {
  if (e.status !== 'Requested') return null;
  const key = offerKey(e);
  const offer = (await liveness.offering([key], staleAfterMs)).get(key);
  return waitingReason(e, offer, Date.now());
}
