// Snapshots of long streams for the actor runtime (actor-runtime.ts): a load folds from the latest
// stored snapshot (src/eventstore/snapshots.ts) and the events after it, instead of the whole
// stream. Measured with `baton bench eventstore` (README): a 100,000-event execution loads in
// ~900 ms from its whole stream and in a few ms from a snapshot near its end.
//
// Written off the hot path: a snapshot is queued when a stream's event count crosses a multiple
// of `every` (by this process's appends, by its subscription, or when a load folded that many)
// and a background loop writes the queue one at a time, never awaited by the caller; a failed
// write is dropped (the next crossing writes again). Ignored, and in time rebuilt, when it was
// written by another machine version, when the event it names is not the stream's event at its
// revision (another store's stream of that name), or when the machine refuses an event after it.
import type { AnyMachineSnapshot } from 'xstate';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import type { SnapshotStore, StoredSnapshot } from '../eventstore/snapshots.ts';
import type { ActorKind, DomainEvent } from './actor-kind.ts';

/** Events between two snapshots of one stream: far above a normal execution's dozen. */
export const DEFAULT_SNAPSHOT_EVERY = 1_000;

export interface FoldedFromSnapshot<S> {
  snapshot: S;
  revision: bigint;
  /** The events read: the snapshot's own (already in it) and every one after. */
  events: StoredEvent[];
  /** The snapshot's revision: `events` start here, not at 0. */
  from: bigint;
}

interface Queued<S> {
  id: string;
  snapshot: S;
  revision: bigint;
  eventId: string;
}

export interface StreamSnapshots<S> {
  /**
   * The stream folded from its snapshot; or, when it has none, its whole stream if that was read
   * on the way; undefined when the caller must read and fold it whole.
   */
  load(id: string): Promise<FoldedFromSnapshot<S> | { whole: StoredEvent[] } | undefined>;
  /** The stream moved from `before` (-1 for none) to `revision`, whose event is `eventId`: queue a snapshot when that crossed a multiple of `every`. */
  moved(id: string, before: bigint, revision: bigint, eventId: string, snapshot: S): void;
  /** A load folded `folded` events to reach `revision`: queue a snapshot when that was `every` or more. */
  folded(id: string, folded: number, revision: bigint, eventId: string, snapshot: S): void;
}

export function streamSnapshots<S extends AnyMachineSnapshot, E extends DomainEvent>(
  store: EventStore,
  kind: ActorKind<S, E>,
  every = DEFAULT_SNAPSHOT_EVERY,
): StreamSnapshots<S> | undefined {
  const snapshots: SnapshotStore | undefined = store.snapshots;
  const { persist, restore } = kind;
  if (!snapshots || !persist || !restore) return undefined;
  const queue = new Map<string, Queued<S>>();
  let writing = false;

  async function drain(): Promise<void> {
    writing = true;
    try {
      for (const [key, q] of queue) {
        queue.delete(key);
        await snapshots!
          .write({ streamId: kind.streamId(q.id), revision: q.revision, eventId: q.eventId, machineVersion: kind.machineVersion, state: persist!(q.snapshot) })
          .catch(() => undefined); // a cache: the next crossing writes again
      }
    } finally {
      writing = false;
    }
  }

  function enqueue(q: Queued<S>): void {
    const held = queue.get(q.id);
    if (held && held.revision >= q.revision) return;
    queue.set(q.id, q);
    if (!writing) setImmediate(() => void drain());
  }

  return {
    async load(id) {
      const streamId = kind.streamId(id);
      let snap: StoredSnapshot | undefined;
      let events: StoredEvent[];
      if (snapshots.readWithEvents) {
        // One round trip: the snapshot and the events from it, or the whole stream when there is none.
        ({ snapshot: snap, events } = await snapshots.readWithEvents(streamId, kind.machineVersion));
        if (!snap) return { whole: events };
      } else {
        snap = await snapshots.read(streamId).catch(() => undefined);
        if (!snap || snap.machineVersion !== kind.machineVersion) return undefined;
        events = await store.readStream(streamId, { fromRevision: snap.revision });
      }
      if (events[0]?.eventId !== snap.eventId) return undefined;
      let snapshot: S;
      try {
        snapshot = restore(snap.state);
      } catch {
        return undefined;
      }
      for (const e of events.slice(1)) {
        const d = kind.decide(id, snapshot, kind.read(e));
        if (!d.ok) return undefined; // the snapshot does not lead where the stream went: fold it whole
        snapshot = d.snapshot;
      }
      const last = events[events.length - 1]!;
      if (events.length > every) enqueue({ id, snapshot, revision: last.revision, eventId: last.eventId });
      return { snapshot, revision: last.revision, events, from: snap.revision };
    },
    moved(id, before, revision, eventId, snapshot) {
      const n = BigInt(every);
      if ((revision + 1n) / n > (before + 1n) / n) enqueue({ id, snapshot, revision, eventId });
    },
    folded(id, folded, revision, eventId, snapshot) {
      if (folded >= every) enqueue({ id, snapshot, revision, eventId });
    },
  };
}
