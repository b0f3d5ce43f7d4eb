// A process's memory of the actors it holds: stream → the snapshot at its last revision. The
// runtime keeps it current from the process's own appends and, in hosts that follow the store,
// from their subscription (actor-runtime.ts, observe), so such a host folds each event once and
// never reloads a stream it already holds. A stale entry is harmless: an append decided on it
// names the revision it saw, conflicts, and the runtime reloads from the store.
//
// Bounded: a final actor leaves at once (nothing moves it any more; only the revision it ended
// at is kept a while, so its final event arriving again, from the subscription after this
// process's own append, is recognised without a read), and past `maxEntries` one not used since
// the eviction last passed it goes (a later read reloads it from the store): the clock
// approximation of least-recently-used. A get only marks its entry; moving it to the back of the
// Map on every get (delete + set) was 2.4% of the hosts' CPU in a 60,000-execution `baton bench`.

export interface CachedSnapshot<S> {
  snapshot: S;
  /** Revision of the stream's last event folded into `snapshot`. */
  revision: bigint;
}

/** Executions, workers or workflows a process holds at once: far past any in-flight load. */
export const DEFAULT_MAX_CACHED = 200_000;

/** Ended actors remembered by their last revision: far more than end between two events of a subscription. */
const MAX_ENDED = 100_000;

interface Entry<S> extends CachedSnapshot<S> {
  /** Read since it was stored or since the eviction last passed it. */
  used: boolean;
}

export class SnapshotCache<S> {
  readonly #entries = new Map<string, Entry<S>>();
  /** Ended actors: the revision they ended at and, when known, the global position of that last event. */
  readonly #ended = new Map<string, { revision: bigint; position: bigint | undefined }>();

  constructor(
    private readonly isFinal: (snapshot: S) => boolean,
    private readonly maxEntries = DEFAULT_MAX_CACHED,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  get(id: string): CachedSnapshot<S> | undefined {
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    entry.used = true;
    return entry;
  }

  /**
   * Remember `snapshot` at `revision`, unless what is held is newer; a final one is forgotten
   * (its end is remembered, with `position`, the global position of its last event, when known).
   */
  put(id: string, snapshot: S, revision: bigint, position?: bigint): void {
    const held = this.#entries.get(id);
    if (held && held.revision > revision) return;
    this.#entries.delete(id);
    if (this.isFinal(snapshot)) {
      this.#ended.set(id, { revision, position });
      if (this.#ended.size > MAX_ENDED) this.#ended.delete(this.#ended.keys().next().value!);
      return;
    }
    // Room first, so the entry being stored is never the one evicted; stored last, it is the newest.
    if (this.#entries.size >= this.maxEntries) this.#evictOne();
    this.#entries.set(id, { snapshot, revision, used: false });
  }

  /** The oldest entry not used since it was stored or last passed; a used one is passed (moved to the back, unmarked). */
  #evictOne(): void {
    for (const [id, entry] of this.#entries) {
      this.#entries.delete(id);
      if (!entry.used) return;
      entry.used = false;
      this.#entries.set(id, entry);
    }
  }

  delete(id: string): void {
    this.#entries.delete(id);
    this.#ended.delete(id);
  }

  /**
   * The revision an actor this cache saw end ended at, if it still remembers, for an event of that
   * stream at global `position`. None when `position` lies past the end's: the stream was removed
   * (retention archived it) and started again under the same id (a keyed submission after the
   * archive), and that event is of the new one. Every event of one stream lies at or before its
   * last event's position: a later revision is stored after the earlier one committed.
   */
  endedAt(id: string, position?: bigint): bigint | undefined {
    const ended = this.#ended.get(id);
    if (ended === undefined) return undefined;
    if (position !== undefined && ended.position !== undefined && position > ended.position) return undefined;
    return ended.revision;
  }

  ids(): IterableIterator<string> {
    return this.#entries.keys();
  }
}
