// One execution as the scheduling view tracks it: what its snapshot does not keep (the
// handoff's event id and revision, the workers an attempt expired on, why the baton came
// back) and where the view has it filed (its phase, slot, holder). noteEvent reads those
// from the events, one exhaustive switch, so a new event type fails the build here.
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import { reclaimReason, type Phase } from './scheduling-entries.ts';

/** Said of a return that spends an attempt though the action never ran (past machine version 8's 3 kept returns). */
const NEVER_STARTED = ' before it started (the execution had used its 3 returns that keep an attempt)';

export interface TrackedExecution {
  action: string;
  /** Its namespace (the slots held per namespace count it). */
  namespace: string;
  priority: number;
  /** Order of arrival, kept across retries: a retried execution keeps its place in line. */
  seq: number;
  bucket: string;
  /** The input, kept only while no worker has advertised the action: its key needs the policy. */
  input?: unknown;
  avoid: Set<string>;
  /** Whether the attempt limit was recorded: by a SchedulingStarted (machine versions 4–6) or a handoff (7). */
  limitRecorded: boolean;
  /** Why the baton last came back, for the retry's or the abandonment's reason. */
  returned: string;
  handoff?: { eventId: string; revision: bigint; at: number };
  /** When it became due (its request, or its retry's time): how long it has waited. */
  since: number;
  phase?: Phase;
  holdsSlot: boolean;
  /** The worker whose load counts it (while handed off or running). */
  heldBy?: string;
  snapshot: ExecutionSnapshot;
}

/** What an event says that the snapshot does not keep, noted on its entry; 'started' for an ExecutionStarted (its holder's orphan, if any, is its own again). */
export function noteEvent(e: TrackedExecution, event: ExecutionEvent, at: { eventId: string; revision: bigint; recordedAt?: Date }): 'started' | undefined {
  switch (event.type) {
    case 'SchedulingStarted':
      if (event.data.maxAttempts !== undefined) e.limitRecorded = true;
      return;
    case 'ExecutionHandedOff':
      if (event.data.maxAttempts !== undefined) e.limitRecorded = true;
      e.handoff = { eventId: at.eventId, revision: at.revision, at: at.recordedAt?.getTime() ?? Date.parse(event.metadata.occurredAt) };
      return;
    case 'ExecutionStarted':
      return 'started';
    case 'OwnershipReclaimed':
      if (event.data.reason === 'schedule-to-start') e.avoid.add(event.data.workerId);
      e.returned = reclaimReason(event.data.reason, event.data.workerId, event.data.attempt) + (e.phase === 'handed-off' && event.data.reason !== 'schedule-to-start' ? NEVER_STARTED : '');
      return;
    case 'OwnershipReleased':
      e.returned = `released: ${event.data.reason}${e.phase === 'handed-off' ? NEVER_STARTED : ''}`;
      return;
    case 'ExecutionFailed':
      e.returned = `attempt ${e.snapshot.context.attempt} failed: ${event.data.error.message}`;
      return;
    case 'ExecutionRetryScheduled':
      e.since = Date.parse(event.data.retryAt);
      return;
    case 'ExecutionRequested':
    case 'ExecutionProgressed':
    case 'ExecutionTagged':
    case 'ExecutionCompleted':
    case 'ExecutionCancelRequested':
    case 'ExecutionCancelled':
    case 'ExecutionTimedOut':
    case 'ExecutionAbandoned':
      return;
    default: {
      const unknown: never = event;
      throw new Error(`the scheduling view does not know event ${(unknown as ExecutionEvent).type}`);
    }
  }
}
