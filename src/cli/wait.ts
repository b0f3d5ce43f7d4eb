// Wait for an execution to reach a final state by following its stream (no polling).
import { finalStatuses as FINAL, isFinal } from '../../actors/execution.machine.ts';
import { START, type EventStore } from '../eventstore/event-store.ts';
import type { ExecutionRuntime, LoadedExecution } from '../runtime/execution-runtime.ts';
import { executionStreamId } from '../../schemas/events.ts';

/** The execution once final, or undefined when `timeoutMs` passed first. */
export async function waitForFinal(store: EventStore, runtime: ExecutionRuntime, executionId: string, timeoutMs?: number): Promise<LoadedExecution | undefined> {
  const ac = new AbortController();
  const timer = timeoutMs ? setTimeout(() => ac.abort(), timeoutMs) : undefined;
  try {
    const current = await runtime.load(executionId);
    if (isFinal(current.snapshot)) return current;
    // The stream id is unique, so a prefix of the whole id follows exactly this execution.
    for await (const event of store.subscribe({ after: START, streamPrefixes: [executionStreamId(executionId)], signal: ac.signal, order: 'stream' })) {
      if (event.revision <= current.revision) continue;
      // The final event: read the stream once more, for its events (who ended it).
      if (event.metadata.stateAfter === undefined || FINAL.has(String(event.metadata.stateAfter))) {
        const loaded = await runtime.load(executionId);
        if (isFinal(loaded.snapshot)) return loaded;
      }
    }
    return undefined;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}
