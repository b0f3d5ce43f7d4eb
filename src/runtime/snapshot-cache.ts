// A process's memory of the actors it holds: stream → the snapshot at its last revision. The
// runtime keeps it current from the process's own appends and, in hosts that follow the store,
// from their subscription (actor-runtime.ts, observe), so such a host folds each event once and
// never reloads a stream it already holds. A stale entry is harmless: an append decided on it
// names the revision it saw, conflicts, and the runtime reloads from the store.
//
// Bounded: a final actor leaves at once (nothing moves it any more; only the revision it ended
// at is kept a while, so its final event arriving again, from the subscription after this
// process's own append, is recognised without a read), and past `maxEntries` the least recently
// used one goes (a later read reloads it from the store).

export interface CachedSnapshot<S> {
  snapshot: S;
  /** Revision of the stream's last event folded into `snapshot`. */
  revision: bigint;
}

/** Executions, workers or workflows a process holds at once: far past any in-flight load. */
export const DEFAULT_MAX_CACHED = 200_000;

/** Ended actors remembered by their last revision: far more than end between two events of a subscription. */
const MAX_ENDED = 100_000;

export class SnapshotCache<S> {
  readonly #entries = new Map<string, CachedSnapshot<S>>();
  readonly #ended = new Map<string, bigint>();

  constructor(
    private readonly isFinal: (snapshot: S) => boolean,
    private readonly maxEntries = DEFAULT_MAX_CACHED,
  ) {}

  get size(): number {
    return this.#entries.size;
  }

  get(id: string): CachedSnapshot<S> | undefined {
    const entry = this.#entries.get(id);
    if (entry) {
      // Most recently used last, so the oldest is the first to go.
      this.#entries.delete(id);
      this.#entries.set(id, entry);
    }
    return entry;
  }

  /** Remember `snapshot` at `revision`, unless what is held is newer; a final one is forgotten. */
  put(id: string, snapshot: S, revision: bigint): void {
    const held = this.#entries.get(id);
    if (held && held.revision > revision) return;
    this.#entries.delete(id);
    if (this.isFinal(snapshot)) {
      this.#ended.set(id, revision);
      if (this.#ended.size > MAX_ENDED) this.#ended.delete(this.#ended.keys().next().value!);
      return;
    }
    this.#entries.set(id, { snapshot, revision });
    if (this.#entries.size > this.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
  }

  delete(id: string): void {
    this.#entries.delete(id);
    this.#ended.delete(id);
  }

  /** The revision an actor this cache saw end ended at, if it still remembers. */
  endedAt(id: string): bigint | undefined {
    return this.#ended.get(id);
  }

  ids(): IterableIterator<string> {
    return this.#entries.keys();
  }
}
