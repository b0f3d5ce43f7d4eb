// How far a projection is behind the store, for its lag gauge, `baton projections status` and verify.
import type { EventStore } from '../eventstore/event-store.ts';

/**
 * When the oldest event a projection has not applied was recorded: committed ones held back by
 * another transaction count (oldestCommittedAfter), so a lag alert fires while a long
 * transaction elsewhere on the server stops the projector (readAll alone said 0 all along).
 */
export async function oldestUnapplied(store: Pick<EventStore, 'readAll' | 'oldestCommittedAfter'>, position: bigint, streamPrefixes: readonly string[]): Promise<Date | undefined> {
  if (store.oldestCommittedAfter) return store.oldestCommittedAfter(position, streamPrefixes);
  const [next] = await store.readAll({ after: position, limit: 1, streamPrefixes: [...streamPrefixes] });
  return next?.recordedAt;
}
