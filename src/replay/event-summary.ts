// Why an execution event happened, in one line, for the plain-text views (`baton events`,
// `inspect`, `replay`): who the baton went to, what failed, why it came back or ended. The JSON
// views carry the whole data; a person reading a table should not need them to learn the reason.
import type { ExecutionEventType } from '../../schemas/events.ts';

type Data = Record<string, unknown>;
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

const SUMMARIES: Partial<Record<ExecutionEventType, (d: Data) => string | undefined>> = {
  ExecutionHandedOff: (d) => `to ${String(d['workerId'])}, attempt ${String(d['attempt'])}`,
  ExecutionStarted: (d) => `attempt ${String(d['attempt'])}`,
  ExecutionFailed: (d) => {
    const error = d['error'] as { message?: unknown } | undefined;
    return `${text(error?.message) ?? 'failed'}${d['retryable'] === false ? ' (not retryable)' : ''}`;
  },
  ExecutionRetryScheduled: (d) => `attempt ${String(d['attempt'])} not before ${String(d['retryAt'])}: ${text(d['reason']) ?? ''}`,
  OwnershipReclaimed: (d) => `${String(d['reason'])}: from ${String(d['workerId'])} in attempt ${String(d['attempt'])}`,
  OwnershipReleased: (d) => text(d['reason']),
  ExecutionCancelRequested: (d) => text(d['reason']),
  ExecutionCancelled: (d) => text(d['reason']),
  ExecutionAbandoned: (d) => text(d['reason']),
  ExecutionTimedOut: (d) => `${String(d['limit'])} limit (deadline ${String(d['deadline'])})`,
};

/** The event's reason in one line, or '' for events that carry none (a request, a completion). */
export function eventSummary(type: string, data: unknown): string {
  const summary = SUMMARIES[type as ExecutionEventType];
  return (summary && data !== null && typeof data === 'object' ? summary(data as Data) : undefined) ?? '';
}
