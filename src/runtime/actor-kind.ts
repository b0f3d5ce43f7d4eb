// What the one event-sourced actor runtime (actor-runtime.ts) needs to know about a kind of
// actor: where its stream lives, how a stored event becomes the machine's event, and how the
// machine decides. Executions, workers and workflows each describe themselves this way
// (execution-kind.ts, worker-kind.ts, workflow-kind.ts); the runtime does the rest the same way
// for all three: load, decide, append at the expected revision, retry on a conflict.
import type { AnyMachineSnapshot } from 'xstate';
import type { StoredEvent } from '../eventstore/event-store.ts';

/** Every domain event: its type, its data, and the metadata the runtime fills in. */
export interface DomainEvent {
  type: string;
  data: unknown;
  metadata: { by: string; occurredAt: string; machineVersion?: string; stateAfter?: string; correlationId?: string; causationId?: string; traceparent?: string; tracestate?: string };
}

/** A domain event without the metadata the runtime fills in (occurredAt from its clock, the machine version, the state after). */
export type Command<E extends DomainEvent> = E extends DomainEvent
  ? {
      type: E['type'];
      data: E['data'];
      by: E['metadata']['by'];
      /** Pass a stable id to make a retried command idempotent. */
      eventId?: string;
      correlationId?: string;
      causationId?: string;
      /** Trace context to record (src/observability/tracing.ts). */
      traceparent?: string;
      tracestate?: string;
    }
  : never;

export type Decision<S> = { ok: true; snapshot: S } | { ok: false; error: Error };

export interface ActorKind<S extends AnyMachineSnapshot, E extends DomainEvent> {
  /** `execution`, `worker`, `workflow`: for messages. */
  readonly name: string;
  /** Recorded in every event's metadata.machineVersion. */
  readonly machineVersion: string;
  /** Every stream of this kind starts with it (`execution-`): what a follower subscribes to. */
  readonly streamPrefix: string;
  streamId(id: string): string;
  /** The actor's id, when `streamId` is one of this kind's streams. */
  idOf(streamId: string): string | undefined;
  /** The snapshot of a stream with no events yet, for kinds whose actor exists before its first event (a worker id); undefined otherwise. */
  empty?(id: string): S;
  /** The event a stored one carries, as the machine reads it (validated when the stream may be old or foreign). */
  read(stored: Pick<StoredEvent, 'type' | 'data' | 'metadata'>): E;
  /** The event a command makes, metadata filled in, validated against the catalog (InvalidEventError names the field). */
  make(command: Command<E>, occurredAt: string): E;
  /**
   * Decide `event`: the snapshot after it, or the typed refusal. `before` is undefined for an
   * empty stream (its first event starts the actor).
   */
  decide(id: string, before: S | undefined, event: E): Decision<S>;
  /** Fold a whole stored history (its events read with `read`); throws when the machine refuses one. */
  fold(id: string, events: readonly E[]): S;
  /** A snapshot nothing moves any more: the caches may let it go. */
  isFinal(snapshot: S): boolean;
  /**
   * The snapshot as JSON and back (the machine's persisted form), for kinds whose streams can
   * grow long: a load then folds from the latest stored snapshot of `machineVersion` (see
   * actor-runtime.ts). Kinds without them always fold their whole stream.
   */
  persist?(snapshot: S): unknown;
  restore?(persisted: unknown): S;
  /** The longest stream worth folding; longer ones are refused (a bound on one read). */
  readonly maxEvents?: number;
}

/** The state name the machine reached, recorded with each event for replay to compare against. */
export const stateName = (snapshot: AnyMachineSnapshot): string => String(snapshot.value);
