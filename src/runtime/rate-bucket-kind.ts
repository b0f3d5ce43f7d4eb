// Rate-limit buckets as the actor runtime sees them: streams `ratelimit-<bucket>`, the bucket
// machine's decisions, and its refusals as RateLimitedError. A bucket exists before its first
// grant (every token there), so the kind has an empty snapshot.
import { RATE_BUCKET_MACHINE_VERSION, decideRateBucket, emptyRateBucket, foldRateBucket, type RateBucketSnapshot } from '../../actors/rate-bucket.machine.ts';
import { RATE_LIMIT_STREAM_PREFIX, RateLimitEvent, rateBucketOfStream, rateLimitStreamId } from '../../schemas/rate-limit-events.ts';
import { BatonError, parseOrThrow } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { ActorKind } from './actor-kind.ts';
import { createActorRuntime, type ActorRuntime, type ActorRuntimeOptions } from './actor-runtime.ts';

/** A day of grants at one pass every 100 ms, and then some (the retention work will snapshot longer ones). */
export const MAX_RATE_BUCKET_EVENTS = 1_000_000;

/** The bucket refused the grant: not enough tokens left (another executor took them), or a grant dated too early. */
export class RateLimitedError extends BatonError {
  constructor(readonly bucket: string, reason: string) {
    super(`rate-limit bucket ${bucket}: grant refused: ${reason}`);
  }
}

export const asRateLimitEvent = (e: { type: string; data: unknown; metadata: unknown }): RateLimitEvent =>
  parseOrThrow(RateLimitEvent, { type: e.type, data: e.data, metadata: e.metadata }, `stored ${e.type} event`);

export const rateBucketKind: ActorKind<RateBucketSnapshot, RateLimitEvent> = {
  name: 'rate-limit bucket',
  machineVersion: RATE_BUCKET_MACHINE_VERSION,
  streamPrefix: RATE_LIMIT_STREAM_PREFIX,
  streamId: rateLimitStreamId,
  idOf: rateBucketOfStream,
  empty: () => emptyRateBucket(),
  read: asRateLimitEvent,
  make: (c, occurredAt) =>
    parseOrThrow(RateLimitEvent, { type: c.type, data: c.data, metadata: { by: c.by, occurredAt, machineVersion: RATE_BUCKET_MACHINE_VERSION } }, `${c.type} event`),
  decide(id, before, event) {
    const d = decideRateBucket(before ?? emptyRateBucket(), event);
    return d.ok ? d : { ok: false, error: new RateLimitedError(id, d.reason) };
  },
  fold(id, events) {
    try {
      return foldRateBucket(events);
    } catch (err) {
      throw new BatonError(`rate-limit bucket ${id}: its stream does not fold through machine version ${RATE_BUCKET_MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
    }
  },
  isFinal: () => false,
  maxEvents: MAX_RATE_BUCKET_EVENTS,
};

export type RateBucketRuntime = ActorRuntime<RateBucketSnapshot, RateLimitEvent>;

export const createRateBucketRuntime = (store: EventStore, options: ActorRuntimeOptions = {}): RateBucketRuntime => createActorRuntime(store, rateBucketKind, options);
