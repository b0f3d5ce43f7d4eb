// Argument checks every EventStore adapter makes before an append, so that a malformed append
// is refused with the same message whichever store is configured (the contract suite checks
// the wording).
import { mapLimit } from '../async/map-limit.ts';
import { BatonError } from '../errors.ts';
import { UUID } from '../ids.ts';
import type { AppendOutcome, AppendRequest, AppendResult, ExpectedRevision, NewEvent } from './event-store.ts';

export function validateAppend(streamId: string, events: NewEvent[], expected: ExpectedRevision): void {
  if (typeof streamId !== 'string' || streamId.length === 0) throw new BatonError('append: streamId must be a non-empty string');
  if (!Array.isArray(events) || events.length === 0) throw new BatonError(`append to ${streamId}: events must be a non-empty array`);
  if (typeof expected === 'bigint' && expected < 0n) throw new BatonError(`append to ${streamId}: expectedRevision must be >= 0, 'no_stream' or 'any'`);
  const seen = new Set<string>();
  events.forEach((e, i) => {
    if (typeof e.eventId !== 'string' || !UUID.test(e.eventId)) throw new BatonError(`append to ${streamId}: events[${i}].eventId must be a uuid`);
    if (seen.has(e.eventId)) throw new BatonError(`append to ${streamId}: events[${i}].eventId ${e.eventId} appears twice in one append`);
    seen.add(e.eventId);
    if (typeof e.type !== 'string' || e.type.length === 0) throw new BatonError(`append to ${streamId}: events[${i}].type must be a non-empty string`);
    if (e.data === undefined) throw new BatonError(`append to ${streamId}: events[${i}].data is required (use {} or null)`);
  });
}

/**
 * appendMany for a store whose atomicity is one stream (EventStoreDB has no multi-stream
 * transaction): every request is an append of its own, each with its own outcome. Different
 * streams go at once; requests of one stream go one after the other, in order, so a later one
 * sees the earlier one's revision as it would in a single transaction.
 */
export async function appendEach(
  append: (streamId: string, events: NewEvent[], o: { expectedRevision: ExpectedRevision }) => Promise<AppendResult>,
  requests: readonly AppendRequest[],
  /** Streams appended to at once: a bulk submit of thousands must not put thousands of appends in flight (each with its own deadline). */
  parallelism = 64,
): Promise<AppendOutcome[]> {
  const outcomes: AppendOutcome[] = new Array(requests.length);
  const byStream = new Map<string, number[]>();
  requests.forEach((r, i) => byStream.set(r.streamId, [...(byStream.get(r.streamId) ?? []), i]));
  await mapLimit(
    [...byStream.values()],
    parallelism,
    async (indexes) => {
      for (const i of indexes) {
        const r = requests[i]!;
        outcomes[i] = await append(r.streamId, r.events, { expectedRevision: r.expectedRevision }).then(
          (result): AppendOutcome => ({ ok: true, result }),
          (error: unknown): AppendOutcome => ({ ok: false, error: error instanceof Error ? error : new Error(String(error)) }),
        );
      }
    },
  );
  return outcomes;
}
