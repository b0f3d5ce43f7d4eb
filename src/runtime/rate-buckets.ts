// Rate-limit buckets as one process knows them: each bucket's snapshot and revision, caught up
// with its stream from where it was (the first time, the whole stream; then only what others
// appended since). The executor grants from it; the API and CLI read from it why an execution
// waits. Folded through the bucket machine, so a stream the machine refuses is never trusted.
import { createHash } from 'node:crypto';
import { tokensAt, type RateBucketSnapshot, type Tokens } from '../../actors/rate-bucket.machine.ts';
import { rateLimitStreamId, type RateLimitPolicy } from '../../schemas/rate-limit-events.ts';
import { concurrencyKeyOf } from '../executor/concurrency-slots.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { rateBucketKind } from './rate-bucket-kind.ts';

/**
 * A bucket's name (its stream is `ratelimit-<name>`): the action, and with a keyed policy the
 * key's value in the input (hashed: a key can be any text, a stream id should not; inputs
 * without it share the action's bucket). A per-namespace limit would be one more scope here
 * (`ns:<namespace>`) over the same machine.
 */
export function rateBucketOf(action: string, policy: Pick<RateLimitPolicy, 'key'>, inputOf: () => unknown): string {
  return rateBucketOfKey(action, policy.key === undefined ? null : concurrencyKeyOf(policy.key, inputOf()));
}

/** The bucket of a key value as concurrencyKeyOf gives it (null: the action's shared bucket). */
export function rateBucketOfKey(action: string, key: string | null): string {
  return key === null ? action : `${action}~${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

export interface HeldBucket {
  snapshot: RateBucketSnapshot;
  /** undefined: the stream has no events. */
  revision: bigint | undefined;
}

export class RateBuckets {
  readonly #held = new Map<string, HeldBucket>();
  constructor(private readonly store: EventStore) {}

  /** As last seen here, without reading the store; caught up on first use. */
  async known(bucket: string): Promise<HeldBucket> {
    return this.#held.get(bucket) ?? this.catchUp(bucket);
  }

  /** Caught up with the store. */
  async catchUp(bucket: string): Promise<HeldBucket> {
    let held = this.#held.get(bucket) ?? { snapshot: rateBucketKind.empty!(bucket), revision: undefined };
    const fromRevision = held.revision === undefined ? 0n : held.revision + 1n;
    for (const stored of await this.store.readStream(rateLimitStreamId(bucket), { fromRevision })) {
      const d = rateBucketKind.decide(bucket, held.snapshot, rateBucketKind.read(stored));
      if (!d.ok) throw d.error; // the stream holds what the machine refuses: never decide from it
      held = { snapshot: d.snapshot, revision: stored.revision };
    }
    this.#held.set(bucket, held);
    return held;
  }

  /** As last seen here, or undefined when never seen: no read. */
  peek(bucket: string): HeldBucket | undefined {
    return this.#held.get(bucket);
  }

  /** What this process itself appended. */
  put(bucket: string, held: HeldBucket): void {
    this.#held.set(bucket, held);
  }

  /** The tokens the bucket holds now, as the store says. */
  async tokens(bucket: string, rate: { limit: number; windowMs: number }, now: number): Promise<Tokens> {
    return tokensAt((await this.catchUp(bucket)).snapshot, rate.limit, rate.windowMs, now);
  }
}

const shared = new WeakMap<EventStore, RateBuckets>();
/** One RateBuckets per store in a process (the API's requests share what they caught up on). */
export function rateBucketsOf(store: EventStore): RateBuckets {
  let b = shared.get(store);
  if (!b) shared.set(store, (b = new RateBuckets(store)));
  return b;
}

export interface RateBucketReplay {
  events: number;
  /** Where the machine now decides otherwise than recorded: a refusal, or another state. */
  divergences: { revision: number; recorded: string | undefined; replayed: string }[];
  granted: number;
}

/** Replay a bucket's stored history through the current machine: every grant must still fit. */
export function replayRateBucket(bucket: string, stored: readonly StoredEvent[]): RateBucketReplay {
  let snapshot = rateBucketKind.empty!(bucket);
  const divergences: RateBucketReplay['divergences'] = [];
  for (const [i, s] of stored.entries()) {
    const e = rateBucketKind.read(s);
    const d = rateBucketKind.decide(bucket, snapshot, e);
    if (!d.ok) {
      divergences.push({ revision: i, recorded: e.metadata.stateAfter, replayed: `refused: ${d.error.message}` });
      break;
    }
    snapshot = d.snapshot;
    if (e.metadata.stateAfter !== undefined && e.metadata.stateAfter !== String(snapshot.value)) divergences.push({ revision: i, recorded: e.metadata.stateAfter, replayed: String(snapshot.value) });
  }
  return { events: stored.length, divergences, granted: snapshot.context.granted };
}
