// One execution's stored history, for export, replay and time-travel: read whole from the
// store, never from a snapshot cache (those hold the present, not the past).
import { executionStreamId } from '../../schemas/events.ts';
import { NotFoundError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { fromStored, type HistoryEvent } from './history.ts';
import { timeline, type TimelineStep } from './inspect.ts';

/** The stored stream as a portable history. NotFoundError when there is no such execution. */
export async function readExecutionHistory(store: EventStore, executionId: string): Promise<HistoryEvent[]> {
  const events = await store.readStream(executionStreamId(executionId));
  if (events.length === 0) throw new NotFoundError('execution', executionId);
  return events.map(fromStored);
}

/** The state after every event, folded through the machine versions that wrote them. */
export async function executionTimeline(store: EventStore, executionId: string): Promise<TimelineStep[]> {
  return timeline(executionId, await readExecutionHistory(store, executionId));
}
