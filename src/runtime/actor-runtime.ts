// The one event-sourced actor runtime. Every actor (an execution, a worker id, a workflow) is
// its stream folded through its machine; `dispatch` decides commands through the machine and
// appends the events at the revision they were decided on, so a stale decision can never be
// stored: the append conflicts, the runtime reloads and decides again (bounded), and a command
// that no longer fits is refused with the kind's typed error. A retried command (same event ids)
// is reported as applied, never stored twice.
//
// Each runtime keeps a per-process snapshot cache (snapshot-cache.ts), fed by its own appends
// and, in hosts that follow the store, by `observe`: such a host folds each event once and
// loads a stream only when it has never seen it. Whoever needs to act on every change (the
// executor's scheduling view, the workflow orchestrator) listens with `onChange`; its own
// appends and its subscription reach it once each, never twice. Time comes from an injected
// clock; the machine never reads one.
//
// Long streams: a kind that can persist its snapshots (execution-kind.ts) loads from the latest
// stored snapshot and the events after it (stream-snapshots.ts); `whole` reads the whole stream.
import type { AnyMachineSnapshot } from 'xstate';
import { BatonError, NotFoundError, WrongExpectedRevisionError } from '../errors.ts';
import type { AppendNotice, AppendOrigin, AppendResult, EventStore, NewEvent, StoredEvent } from '../eventstore/event-store.ts';
import { stateName, type ActorKind, type Command, type DomainEvent } from './actor-kind.ts';
import { dispatchMany, type DispatchOutcome, type DispatchRequest } from './dispatch-many.ts';
import { SnapshotCache } from './snapshot-cache.ts';
import { streamSnapshots } from './stream-snapshots.ts';
import { newId } from '../ids.ts';

export type { DispatchOutcome, DispatchRequest } from './dispatch-many.ts';

export type Clock = () => Date;
export const systemClock: Clock = () => new Date();

export interface Loaded<S> {
  id: string;
  snapshot: S;
  /** Revision of the stream's last event (the expected revision of the next append); undefined for a stream with none. */
  revision: bigint | undefined;
  /** The stored events, when this load read the stream (never from the cache): all of them, or from `from` on. */
  events?: StoredEvent[];
  /** Set when the load started from a stored snapshot: `events` start at this revision, not at 0. */
  from?: bigint;
}

export interface Dispatched<S> {
  id: string;
  snapshot: S;
  revision: bigint;
  /** False when the events were already stored (a retried command). */
  appended: boolean;
}

/** One event of a change, with its place in its stream (and in the store, when it came from there). */
export interface ChangedBy<E> {
  event: E;
  eventId: string;
  revision: bigint;
  globalPosition?: bigint;
  recordedAt?: Date;
}

/** An actor's snapshot moved on: by this process's append, by its subscription, or by a load of a stream it had not seen. */
export interface Change<S, E> {
  id: string;
  before: S | undefined;
  after: S;
  events: ChangedBy<E>[];
  source: 'own' | 'observed' | 'loaded';
}

/** Commands, or how to make them from the state they will be decided on. */
export type CommandsFor<S, E extends DomainEvent> = (snapshot: S | undefined) => Command<E> | Command<E>[] | undefined;
export type Commands<S, E extends DomainEvent> = Command<E> | Command<E>[] | CommandsFor<S, E>;

export interface ActorRuntimeOptions {
  clock?: Clock;
  /**
   * This process follows the store and observes every event of this kind (the executor): its
   * cache is current, so `load` answers from it. Elsewhere `load` reads the store (a cache only
   * fed by one's own appends is the present as this process left it, not as it is), and only
   * `dispatch` starts from the cache, where a stale snapshot costs one conflict and a reload.
   */
  followsStore?: boolean;
  /** How often dispatch reloads and decides again after losing a revision race. Default 5. */
  maxConflictRetries?: number;
  /** The snapshot cache's bound (snapshot-cache.ts). */
  maxCached?: number;
  /** Events between two stored snapshots of a long stream (stream-snapshots.ts). */
  snapshotEvery?: number;
}

/** A stored event the machine refuses: the stream was written by other rules (or corrupted). Its cache entry is dropped. */
export class UnfoldableEventError extends BatonError {}

export interface LoadOptions {
  /** Read the stream (or its snapshot) even when the cache holds the actor. */
  fresh?: boolean;
  /** Read the whole stream, not from a snapshot. */
  whole?: boolean;
  /** Read at once, but take what was read into the cache, and tell the listeners, only once this settles: loads in flight together still reach the listeners in order. */
  turn?: Promise<unknown>;
}

export interface ActorRuntime<S extends AnyMachineSnapshot, E extends DomainEvent> {
  readonly kind: ActorKind<S, E>;
  /** The actor's current snapshot: folded from its stream, or from the cache where the process follows the store (and `fresh` is not set). NotFoundError when it has no events and no empty state. */
  load(id: string, o?: LoadOptions): Promise<Loaded<S>>;
  /**
   * Decide `commands` in order and append them at once at the revision they were decided on (see
   * above). Commands that depend on the state are given as a function of the snapshot (undefined:
   * an empty stream), made again on every attempt; it returns undefined when there is nothing to
   * do (`appended: false`).
   */
  dispatch(id: string, commands: Commands<S, E>, o?: { known?: Pick<Loaded<S>, 'snapshot' | 'revision'> } & Pick<AppendNotice, 'othersWait'>): Promise<Dispatched<S>>;
  /**
   * Many dispatches with one appendMany (one transaction, where the store has them): each is
   * decided on what the caller knows or the cache holds, and has its own outcome, in the
   * requests' order. One that conflicts, that the remembered state refuses, or that has no
   * remembered state goes on alone as `dispatch` would (reload, decide again), so a conflict
   * for one actor costs only that one. Requests for the same actor are applied in order.
   */
  dispatchMany(requests: readonly DispatchRequest<S, E>[], options?: Pick<AppendNotice, 'othersWait'>): Promise<DispatchOutcome<S>[]>;
  /** A stored event from the caller's subscription: fold it into the cache (once), and tell the listeners (the change, unless it came from a read of the whole stream). */
  observe(stored: StoredEvent): Promise<Change<S, E> | undefined>;
  /** Whether observe would pass `stored` over, applied already (no I/O): a follower's check before it pays for observe's promise. */
  applied(stored: StoredEvent): boolean;
  /** Listen to every change of every actor of this kind this process sees; returns the unsubscribe. */
  onChange(listener: (change: Change<S, E>) => void): () => void;
  /** What the cache holds for `id` now, if anything (no I/O). */
  cached(id: string): { snapshot: S; revision: bigint } | undefined;
  /** A follower caught up and keeps this runtime current from now on: loads may answer from the cache (see followsStore). */
  followed(): void;
  /**
   * The token this runtime's appends carry (AppendOrigin): it applies them itself (recordOwn), so
   * a follower that feeds it need not be woken to read them back.
   */
  readonly origin: AppendOrigin;
}

export function createActorRuntime<S extends AnyMachineSnapshot, E extends DomainEvent>(
  store: EventStore,
  kind: ActorKind<S, E>,
  options: ActorRuntimeOptions = {},
): ActorRuntime<S, E> {
  const clock = options.clock ?? systemClock;
  const maxConflictRetries = options.maxConflictRetries ?? 5;
  const cache = new SnapshotCache<S>((s) => kind.isFinal(s), options.maxCached);
  let followsStore = options.followsStore ?? false;
  const listeners = new Set<(change: Change<S, E>) => void>();
  const snapshots = streamSnapshots(store, kind, options.snapshotEvery);
  const origin: AppendOrigin = { appender: `${kind.name} runtime` };

  /** Every listener hears every change, even when one before it throws (a bug there must not starve the others); the first error is rethrown. */
  function emit(change: Change<S, E>): void {
    let failure: { err: unknown } | undefined;
    for (const listener of listeners) {
      try {
        listener(change);
      } catch (err) {
        failure ??= { err };
      }
    }
    if (failure) throw failure.err;
  }

  async function readStream(id: string): Promise<StoredEvent[]> {
    const limit = kind.maxEvents === undefined ? undefined : kind.maxEvents + 1;
    const events = await store.readStream(kind.streamId(id), limit === undefined ? {} : { limit });
    if (kind.maxEvents !== undefined && events.length > kind.maxEvents) {
      throw new BatonError(`${kind.name} ${id}: its stream has more than ${kind.maxEvents} events, more than any ${kind.name} needs; refusing to fold it`);
    }
    return events;
  }

  async function loadFresh(id: string, o: Omit<LoadOptions, 'fresh'> = {}): Promise<Loaded<S>> {
    const viaSnapshots = snapshots && !o.whole ? await snapshots.load(id) : undefined;
    const fromSnapshot = viaSnapshots && 'from' in viaSnapshots ? viaSnapshots : undefined;
    let events: StoredEvent[];
    let snapshot: S;
    if (fromSnapshot) {
      ({ events, snapshot } = fromSnapshot);
    } else {
      events = viaSnapshots && 'whole' in viaSnapshots ? viaSnapshots.whole : await readStream(id);
      if (events.length === 0) {
        const empty = kind.empty?.(id);
        if (!empty) throw new NotFoundError(kind.name, id);
        return { id, snapshot: empty, revision: undefined, events };
      }
      snapshot = kind.fold(id, events.map((e) => kind.read(e)));
      snapshots?.folded(id, events.length, events[events.length - 1]!.revision, events[events.length - 1]!.eventId, snapshot);
    }
    if (o.turn) await o.turn; // no extra microtask on the loads that wait for nothing
    const revision = events[events.length - 1]!.revision;
    // Whatever this read shows that the cache had not seen is a change like any other: a listener
    // told only by observe would never hear of events a load took into the cache first.
    const held = cache.get(id);
    const last = events[events.length - 1]!;
    const seen = held?.revision ?? cache.endedAt(id, last.globalPosition) ?? -1n;
    cache.put(id, snapshot, revision, last.globalPosition);
    if (revision > seen) {
      const news = events.filter((e) => e.revision > seen);
      emit({
        id,
        before: held?.snapshot,
        after: snapshot,
        source: 'loaded',
        events: news.map((e) => ({ event: kind.read(e), eventId: e.eventId, revision: e.revision, globalPosition: e.globalPosition, recordedAt: e.recordedAt })),
      });
    }
    return { id, snapshot, revision, events, ...(fromSnapshot && { from: fromSnapshot.from }) };
  }

  function fromCache(id: string): Loaded<S> | undefined {
    const held = cache.get(id);
    return held && { id, snapshot: held.snapshot, revision: held.revision };
  }

  async function load(id: string, o: LoadOptions = {}): Promise<Loaded<S>> {
    return (followsStore && !o.fresh && !o.whole ? fromCache(id) : undefined) ?? loadFresh(id, o);
  }

  const toNew = (event: E, eventId: string): NewEvent => ({ eventId, type: event.type, data: event.data, metadata: event.metadata });

  /** Commands made into events once (one clock reading, one set of ids), for every attempt. */
  function prepare(id: string, commands: Command<E> | Command<E>[]): { events: E[]; eventIds: string[] } {
    const list = Array.isArray(commands) ? commands : [commands];
    if (list.length === 0) throw new BatonError(`${kind.name} ${id}: dispatch needs at least one command`);
    const occurredAt = clock().toISOString();
    return { events: list.map((c) => kind.make(c, occurredAt)), eventIds: list.map((c) => c.eventId ?? newId()) };
  }

  /** The events decided in order on `before`, each stamped with the state it leads to; or the machine's refusal. */
  function decideAll(id: string, before: S | undefined, events: E[]): { ok: true; snapshot: S; decided: E[] } | { ok: false; error: Error } {
    let snapshot = before;
    const decided: E[] = [];
    for (const event of events) {
      const d = kind.decide(id, snapshot, event);
      if (!d.ok) return { ok: false, error: d.error };
      snapshot = d.snapshot;
      decided.push({ ...event, metadata: { ...event.metadata, stateAfter: stateName(snapshot) } });
    }
    return { ok: true, snapshot: snapshot!, decided };
  }

  /**
   * An append of ours was stored (or found stored already): remember it and tell the listeners
   * what they have not heard. This process's follower is woken by the commit and may read the
   * events back before the append's answer arrives here (for 28% of completions in a
   * `baton bench`): it told the listeners already, so they are not told twice.
   */
  function recordOwn(id: string, before: S | undefined, d: { snapshot: S; decided: E[]; eventIds: string[] }, r: AppendResult): Dispatched<S> {
    const dispatched = { id, snapshot: d.snapshot, revision: r.nextExpectedRevision };
    if (r.idempotentReplay) return { ...dispatched, appended: false };
    const first = r.nextExpectedRevision - BigInt(d.decided.length - 1);
    const held = cache.get(id);
    const seen = held?.revision ?? cache.endedAt(id) ?? first - 1n;
    if (seen >= r.nextExpectedRevision) return { ...dispatched, appended: true };
    cache.put(id, d.snapshot, r.nextExpectedRevision, r.lastPosition);
    snapshots?.moved(id, first - 1n, r.nextExpectedRevision, d.eventIds[d.eventIds.length - 1]!, d.snapshot);
    const events = d.decided.map((event, i) => ({ event, eventId: d.eventIds[i]!, revision: first + BigInt(i) }));
    // Part of it read back already (a batch boundary fell inside it): the rest, from what was told.
    if (seen >= first) emit({ id, before: held?.snapshot, after: d.snapshot, source: 'own', events: events.filter((e) => e.revision > seen) });
    else emit({ id, before, after: d.snapshot, source: 'own', events });
    return { ...dispatched, appended: true };
  }

  async function dispatch(id: string, commands: Commands<S, E>, o: { known?: Pick<Loaded<S>, 'snapshot' | 'revision'> } & Pick<AppendNotice, 'othersWait'> = {}): Promise<Dispatched<S>> {
    const fixed = typeof commands === 'function' ? undefined : prepare(id, commands);
    // Set once a refusal was decided on a load from a snapshot: the events it stands for may be
    // this very command, stored by an earlier try, so the next round reads the whole stream.
    let whole = false;
    for (let attempt = 1; ; attempt++) {
      // A caller that just loaded (or just dispatched) may pass what it knows: if that is
      // stale, the append conflicts and the next round reads the store.
      const loaded: Loaded<S> = attempt === 1 ? (o.known ? { id, ...o.known } : (fromCache(id) ?? (await loadFresh(id)))) : await loadFresh(id, { whole });
      let prepared = fixed;
      if (!prepared) {
        // Commands that depend on the state are made again from each attempt's snapshot.
        const made = (commands as CommandsFor<S, E>)(loaded.revision === undefined && !kind.empty ? undefined : loaded.snapshot);
        if (made === undefined) {
          // Nothing to do, says a remembered snapshot: as with a refusal, ask the store first.
          if (!loaded.events && attempt <= maxConflictRetries) {
            cache.delete(id);
            continue;
          }
          return { id, snapshot: loaded.snapshot, revision: loaded.revision ?? -1n, appended: false };
        }
        prepared = prepare(id, made);
      }
      const { events, eventIds } = prepared;
      if (loaded.events && loaded.events.length > 0 && eventIds.every((eid) => loaded.events!.some((e) => e.eventId === eid))) {
        return { id, snapshot: loaded.snapshot, revision: loaded.revision!, appended: false };
      }
      const before = loaded.revision === undefined && !kind.empty ? undefined : loaded.snapshot;
      const d = decideAll(id, before, events);
      if (!d.ok) {
        // Decided on a remembered snapshot (the cache, or the caller's): the store may say
        // otherwise (it moved on, or these very events were stored by an earlier try), so a
        // refusal is confirmed against a fresh read before it is reported.
        if ((!loaded.events || loaded.from !== undefined) && attempt <= maxConflictRetries) {
          if (loaded.from !== undefined) whole = true;
          cache.delete(id);
          continue;
        }
        throw d.error;
      }
      const { snapshot, decided } = d;
      try {
        const r = await store.append(kind.streamId(id), decided.map((e, i) => toNew(e, eventIds[i]!)), { expectedRevision: loaded.revision ?? 'no_stream', origin, ...(o.othersWait !== undefined && { othersWait: o.othersWait }) });
        return recordOwn(id, before, { snapshot, decided, eventIds }, r);
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError && attempt <= maxConflictRetries) {
          cache.delete(id);
          continue;
        }
        throw err;
      }
    }
  }

  function applied(stored: StoredEvent): boolean {
    const id = kind.idOf(stored.streamId);
    if (id === undefined) return true;
    const held = cache.get(id);
    if (held && stored.revision <= held.revision) return true; // our own append, or a load
    const ended = cache.endedAt(id, stored.globalPosition);
    return ended !== undefined && stored.revision <= ended; // its end, seen already
  }

  async function observe(stored: StoredEvent): Promise<Change<S, E> | undefined> {
    if (applied(stored)) return undefined;
    const id = kind.idOf(stored.streamId)!;
    const held = cache.get(id);
    let before: S | undefined;
    if (held && stored.revision === held.revision + 1n) before = held.snapshot;
    else if (stored.revision === 0n) before = kind.empty?.(id);
    else {
      // Not held (forgotten, or followed from the middle of its stream): read it whole, once;
      // the load tells the listeners what it brought.
      await loadFresh(id);
      return undefined;
    }
    const event = kind.read(stored);
    const d = kind.decide(id, before, event);
    if (!d.ok) {
      cache.delete(id);
      throw new UnfoldableEventError(`${kind.name} ${id}: stored event ${stored.revision} (${stored.type}) does not fold: ${d.error.message}`, { cause: d.error });
    }
    cache.put(id, d.snapshot, stored.revision, stored.globalPosition);
    snapshots?.moved(id, stored.revision - 1n, stored.revision, stored.eventId, d.snapshot);
    const change: Change<S, E> = {
      id,
      before,
      after: d.snapshot,
      source: 'observed',
      events: [{ event, eventId: stored.eventId, revision: stored.revision, globalPosition: stored.globalPosition, recordedAt: stored.recordedAt }],
    };
    emit(change);
    return change;
  }

  return {
    kind,
    load,
    dispatch,
    dispatchMany: (requests, options) => dispatchMany({ kind, store, origin, cache, prepare, decideAll, recordOwn, toNew, dispatch }, requests, options),
    observe,
    applied,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    cached: (id) => cache.get(id),
    followed: () => void (followsStore = true),
    origin,
  };
}
