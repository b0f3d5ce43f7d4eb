// The actor runtime's batched dispatch (actor-runtime.ts, dispatchMany): many actors' commands
// decided on what the caller knows or the cache holds, and appended with one appendMany (one
// transaction, where the store has them). Each request has its own outcome. One that conflicts,
// that a remembered state refuses or finds nothing to do for, or that has no remembered state
// goes on alone through `dispatch` (reload, decide again, bounded), so a conflict costs only its
// own actor; fixed commands go on with the event ids first made, so a stored try is recognised.
// One actor's requests are applied in the order given.
import type { AnyMachineSnapshot } from 'xstate';
import type { AppendNotice, AppendOrigin, AppendRequest, AppendResult, EventStore, NewEvent } from '../eventstore/event-store.ts';
import { WrongExpectedRevisionError } from '../errors.ts';
import type { ActorKind, Command, DomainEvent } from './actor-kind.ts';
import type { Commands, CommandsFor, Dispatched, Loaded } from './actor-runtime.ts';
import type { SnapshotCache } from './snapshot-cache.ts';

/** One actor's part of a dispatchMany. */
export interface DispatchRequest<S, E extends DomainEvent> {
  id: string;
  commands: Commands<S, E>;
  known?: Pick<Loaded<S>, 'snapshot' | 'revision'>;
}

/** What became of one request of a dispatchMany: dispatched (or found dispatched already), or the error dispatch would have thrown. */
export type DispatchOutcome<S> = { ok: true; value: Dispatched<S> } | { ok: false; error: unknown };

type Decided<S, E> = { snapshot: S; decided: E[]; eventIds: string[] };

/** The runtime's parts a batch is made with (actor-runtime.ts). */
export interface BatchParts<S extends AnyMachineSnapshot, E extends DomainEvent> {
  kind: ActorKind<S, E>;
  store: EventStore;
  /** The runtime's AppendOrigin. */
  origin: AppendOrigin;
  cache: SnapshotCache<S>;
  prepare(id: string, commands: Command<E> | Command<E>[]): { events: E[]; eventIds: string[] };
  decideAll(id: string, before: S | undefined, events: E[]): { ok: true; snapshot: S; decided: E[] } | { ok: false; error: Error };
  recordOwn(id: string, before: S | undefined, d: Decided<S, E>, r: AppendResult): Dispatched<S>;
  toNew(event: E, eventId: string): NewEvent;
  dispatch(id: string, commands: Commands<S, E>, o?: Pick<AppendNotice, 'othersWait'>): Promise<Dispatched<S>>;
}

/** Fixed commands carrying the event ids they were first prepared with. */
const withIds = <E extends DomainEvent>(made: Command<E> | Command<E>[], eventIds: string[]): Command<E>[] =>
  (Array.isArray(made) ? made : [made]).map((c, i) => ({ ...c, eventId: eventIds[i]! }));

function settle<T>(fn: () => T): { ok: true; value: T } | { ok: false; error: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** `othersWait`: see AppendNotice (event-store.ts); for the batch's appendMany and each request that goes on alone. */
export async function dispatchMany<S extends AnyMachineSnapshot, E extends DomainEvent>(
  rt: BatchParts<S, E>,
  requests: readonly DispatchRequest<S, E>[],
  notice: Pick<AppendNotice, 'othersWait'> = {},
): Promise<DispatchOutcome<S>[]> {
  const { kind, store, origin, cache, prepare, decideAll, recordOwn, toNew, dispatch } = rt;
  const outcomes = new Array<DispatchOutcome<S>>(requests.length);
  /** Requests that go on alone after the batch, with fixed commands as first made (same event ids: a stored retry is recognised). */
  const alone: { at: number; commands: Commands<S, E> }[] = [];
  const batch: { at: number; before: S | undefined; d: { snapshot: S; decided: E[]; eventIds: string[] }; request: AppendRequest; commands: Commands<S, E> }[] = [];
  const inBatch = new Set<string>();
  const aloneIds = new Set<string>();
  const goAlone = (at: number, commands: Commands<S, E>) => {
    alone.push({ at, commands });
    aloneIds.add(requests[at]!.id);
  };
  for (const [at, { id, commands, known }] of requests.entries()) {
    const start = known ?? cache.get(id);
    // An actor's second request waits for its first (which may go on alone): in order.
    if (!start || inBatch.has(id) || aloneIds.has(id)) {
      goAlone(at, commands);
      continue;
    }
    const before = start.revision === undefined && !kind.empty ? undefined : start.snapshot;
    const made = typeof commands === 'function' ? (commands as CommandsFor<S, E>)(before) : commands;
    if (made === undefined) {
      goAlone(at, commands); // nothing to do, says a remembered state: dispatch asks the store
      continue;
    }
    let prepared: { events: E[]; eventIds: string[] };
    try {
      prepared = prepare(id, made);
    } catch (error) {
      outcomes[at] = { ok: false, error };
      continue;
    }
    const again = typeof commands === 'function' ? commands : withIds(made, prepared.eventIds);
    const d = decideAll(id, before, prepared.events);
    if (!d.ok) {
      goAlone(at, again); // refused on a remembered state: dispatch confirms it
      continue;
    }
    inBatch.add(id);
    const events = d.decided.map((e, i) => toNew(e, prepared.eventIds[i]!));
    batch.push({ at, before, d: { ...d, eventIds: prepared.eventIds }, request: { streamId: kind.streamId(id), events, expectedRevision: start.revision ?? 'no_stream' }, commands: again });
  }
  if (batch.length > 0) {
    const results = await store.appendMany(batch.map((b) => b.request), { origin, ...notice }).catch((err: unknown) => batch.map(() => ({ ok: false as const, error: err })));
    for (const [i, b] of batch.entries()) {
      const r = results[i]!;
      if (r.ok) outcomes[b.at] = settle(() => recordOwn(requests[b.at]!.id, b.before, b.d, r.result));
      else if (r.error instanceof WrongExpectedRevisionError) {
        cache.delete(requests[b.at]!.id);
        goAlone(b.at, b.commands);
      } else outcomes[b.at] = { ok: false, error: r.error };
    }
  }
  // Alone: one actor's requests in order, different actors side by side.
  const byActor = new Map<string, typeof alone>();
  for (const a of alone.sort((x, y) => x.at - y.at)) byActor.set(requests[a.at]!.id, [...(byActor.get(requests[a.at]!.id) ?? []), a]);
  await Promise.all(
    [...byActor].map(async ([id, list]) => {
      for (const a of list) outcomes[a.at] = await dispatch(id, a.commands, notice).then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));
    }),
  );
  return outcomes;
}
