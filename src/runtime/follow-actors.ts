// One subscription per process for the actors it keeps current: catch up, then follow the
// store (src/eventstore/follow.ts), and hand each event to the runtime of its kind, which folds
// it into its snapshot cache once and tells its listeners (the executor's scheduling view, the
// workflow orchestrator). Hosts that share runtimes share this follower: two followers feeding
// one runtime would each find the other's events already applied.
import type { Logger } from 'pino';
import type { AnyMachineSnapshot } from 'xstate';
import { mapLimit } from '../async/map-limit.ts';
import { NotFoundError } from '../errors.ts';
import { START, type EventStore, type StoredEvent } from '../eventstore/event-store.ts';
import { catchUpAndFollow } from '../eventstore/follow.ts';
import type { StartPoint } from './start-point.ts';
import type { DomainEvent } from './actor-kind.ts';
import { UnfoldableEventError, type ActorRuntime } from './actor-runtime.ts';

export interface ActorFollower {
  /** Resolves once every event stored before the follower started has been applied. */
  readonly ready: Promise<void>;
  stop(): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyActorRuntime = ActorRuntime<AnyMachineSnapshot, any>;

/** Events applied from NOTIFYs and not read back yet that a follower remembers (see confirmsHeard): far more than arrive between two reads. */
const HEARD_KEPT = 10_000;
/** Live actors loaded at once while starting from a checkpoint. */
const LOADS_IN_FLIGHT = 16;

export interface FollowActorsOptions {
  store: EventStore;
  runtimes: readonly ActorRuntime<AnyMachineSnapshot, DomainEvent>[] | readonly AnyActorRuntime[];
  log: Logger;
  who: string;
  /**
   * Where to start (start-point.ts: a checkpoint and the actors live there); undefined, or a
   * failure to read it, means following from 0 (every event ever stored).
   */
  startFrom?: () => Promise<StartPoint | undefined>;
}

export function followActors(o: FollowActorsOptions): ActorFollower {
  const ac = new AbortController();
  const runtimes = o.runtimes as readonly AnyActorRuntime[];
  let caughtUp!: () => void;
  const ready = new Promise<void>((resolve) => (caughtUp = resolve));

  const runtimeOf = (streamId: string) => runtimes.find((r) => r.kind.idOf(streamId) !== undefined);

  // Most events a busy host reads back it has applied already (its runtimes' own appends): those
  // are passed over without a promise (catchUpAndFollow awaits only what returns one).
  function onEvent(event: StoredEvent): Promise<void> | undefined {
    if (heardIds.size > 0 && !confirmsHeard(event)) return load(event.streamId);
    const runtime = runtimeOf(event.streamId);
    return runtime === undefined || runtime.applied(event) ? undefined : observe(runtime, event);
  }

  async function observe(runtime: AnyActorRuntime, event: StoredEvent): Promise<void> {
    try {
      await runtime.observe(event);
    } catch (err) {
      // One stream the machine cannot fold must not stop the host from following the others.
      if (!(err instanceof UnfoldableEventError)) throw err;
      o.log.error({ err, streamId: event.streamId, revision: Number(event.revision) }, `${o.who}: a stored event does not fold; skipping that stream until it is loaded again`);
    }
  }

  /** Load each live actor (its snapshot + tail): the runtime tells the listeners what it brought, once `turn` settles. */
  async function load(streamId: string, turn?: Promise<unknown>): Promise<void> {
    for (const runtime of runtimes) {
      const id = runtime.kind.idOf(streamId);
      if (id === undefined) continue;
      try {
        await runtime.load(id, { fresh: true, ...(turn && { turn }) });
      } catch (err) {
        // Removed since (retention), or a stream the machine cannot fold: as observe would.
        if (err instanceof NotFoundError) return;
        if (!(err instanceof UnfoldableEventError)) throw err;
        o.log.error({ err, streamId }, `${o.who}: a live stream does not fold; skipping it until it is loaded again`);
      }
      return;
    }
  }

  /** The position to follow after: the checkpoint once its live actors are loaded, else 0. */
  async function start(): Promise<bigint> {
    if (!o.startFrom) return START;
    const began = Date.now();
    try {
      const point = await o.startFrom();
      if (!point) {
        o.log.info(`${o.who}: no checkpoint yet (the projector has not run); following the store from the start`);
        return START;
      }
      // Read LOADS_IN_FLIGHT at a time, but told in the start point's order (the order the
      // executions were requested): the executor's queue numbers equal priorities as it hears them.
      let previous: Promise<unknown> = Promise.resolve();
      await mapLimit(point.live, LOADS_IN_FLIGHT, (streamId) => {
        const turn = previous;
        const loaded = load(streamId, turn);
        previous = loaded.catch(() => undefined);
        return loaded;
      });
      o.log.info({ after: String(point.after), live: point.live.length, ms: Date.now() - began }, `${o.who}: starting from a checkpoint`);
      return point.after;
    } catch (err) {
      // Whatever was loaded stays valid: following from 0 folds only what it has not seen.
      if (ac.signal.aborted) return START;
      o.log.warn({ err }, `${o.who}: could not start from a checkpoint; following the store from the start`);
      return START;
    }
  }

  /**
   * Events another process committed, heard before the follower reads them (EventStore.onAppendHeard):
   * applied at once when they follow what the runtime holds (or start a stream it does not hold),
   * as the follower would apply them; the follower still reads them, and finds them applied. Any
   * other is left to the follower (a gap, or a stream it would have to load first).
   */
  function heard(events: StoredEvent[]): void {
    for (const event of events) {
      const runtime = runtimeOf(event.streamId);
      if (runtime === undefined || runtime.applied(event)) continue;
      const held = runtime.cached(runtime.kind.idOf(event.streamId)!);
      if (held ? event.revision !== held.revision + 1n : event.revision !== 0n) return;
      rememberHeard(event);
      observe(runtime, event).catch((err: unknown) => o.log.warn({ err, streamId: event.streamId }, `${o.who}: could not apply an event heard before reading it; the follower reads it`));
    }
  }

  /**
   * What was applied from a NOTIFY until the follower reads it: the read must find the same event
   * at that revision, or the stream is loaded again from the store (a NOTIFY is not a record: any
   * session of the database may send one). Bounded: a heard event never read (it was not stored)
   * is forgotten after HEARD_KEPT others.
   */
  const heardIds = new Map<string, string>();
  const heardKey = (e: StoredEvent) => `${e.streamId}\u0000${e.revision}`;
  function rememberHeard(event: StoredEvent): void {
    heardIds.set(heardKey(event), event.eventId);
    if (heardIds.size > HEARD_KEPT) heardIds.delete(heardIds.keys().next().value!);
  }
  function confirmsHeard(event: StoredEvent): boolean {
    const key = heardKey(event);
    const heardId = heardIds.get(key);
    if (heardId === undefined) return true;
    heardIds.delete(key);
    if (heardId === event.eventId) return true;
    o.log.error({ streamId: event.streamId, revision: Number(event.revision), heard: heardId, stored: event.eventId }, `${o.who}: an event heard in a NOTIFY is not the one stored; loading the stream again`);
    return false;
  }
  let stopHearing: (() => void) | undefined;

  const following = start().then((after) =>
    catchUpAndFollow(
      // Per-stream order is all the runtimes need (each folds its own streams): `stream` order, so
      // new work is seen as soon as it commits, not after other applications' transactions end.
      // Each runtime applies its own appends itself (recordOwn): they need not wake this follower.
      { store: o.store, streamPrefixes: runtimes.map((r) => r.kind.streamPrefix), signal: ac.signal, log: o.log, who: o.who, order: 'stream', after, appliedBy: new Set(runtimes.map((r) => r.origin)) },
      {
        onEvent,
        onCaughtUp: () => {
          for (const r of runtimes) r.followed();
          // Only once caught up: before, a stream's earlier events may not be applied yet.
          if (!ac.signal.aborted) stopHearing ??= o.store.onAppendHeard?.(heard);
          caughtUp();
        },
      },
    ),
  );
  return {
    ready,
    async stop() {
      ac.abort();
      stopHearing?.();
      await following;
    },
  };
}
