// One subscription per process for the actors it keeps current: catch up, then follow the
// store (src/eventstore/follow.ts), and hand each event to the runtime of its kind, which folds
// it into its snapshot cache once and tells its listeners (the executor's scheduling view, the
// workflow orchestrator). Hosts that share runtimes share this follower: two followers feeding
// one runtime would each find the other's events already applied.
import type { Logger } from 'pino';
import type { AnyMachineSnapshot } from 'xstate';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { catchUpAndFollow } from '../eventstore/follow.ts';
import type { DomainEvent } from './actor-kind.ts';
import { UnfoldableEventError, type ActorRuntime } from './actor-runtime.ts';

export interface ActorFollower {
  /** Resolves once every event stored before the follower started has been applied. */
  readonly ready: Promise<void>;
  stop(): Promise<void>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyActorRuntime = ActorRuntime<AnyMachineSnapshot, any>;

export function followActors(o: { store: EventStore; runtimes: readonly ActorRuntime<AnyMachineSnapshot, DomainEvent>[] | readonly AnyActorRuntime[]; log: Logger; who: string }): ActorFollower {
  const ac = new AbortController();
  const runtimes = o.runtimes as readonly AnyActorRuntime[];
  let caughtUp!: () => void;
  const ready = new Promise<void>((resolve) => (caughtUp = resolve));

  async function onEvent(event: StoredEvent): Promise<void> {
    const runtime = runtimes.find((r) => r.kind.idOf(event.streamId) !== undefined);
    try {
      await runtime?.observe(event);
    } catch (err) {
      // One stream the machine cannot fold must not stop the host from following the others.
      if (!(err instanceof UnfoldableEventError)) throw err;
      o.log.error({ err, streamId: event.streamId, revision: Number(event.revision) }, `${o.who}: a stored event does not fold; skipping that stream until it is loaded again`);
    }
  }

  const following = catchUpAndFollow(
    // Per-stream order is all the runtimes need (each folds its own streams): `stream` order, so
    // new work is seen as soon as it commits, not after other applications' transactions end.
    { store: o.store, streamPrefixes: runtimes.map((r) => r.kind.streamPrefix), signal: ac.signal, log: o.log, who: o.who, order: 'stream' },
    {
      onEvent,
      onCaughtUp: () => {
        for (const r of runtimes) r.followed();
        caughtUp();
      },
    },
  );
  return {
    ready,
    async stop() {
      ac.abort();
      await following;
    },
  };
}
