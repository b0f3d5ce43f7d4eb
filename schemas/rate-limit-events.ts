// The rate-limit event catalog: one stream per rate-limit bucket (`ratelimit-<bucket>`). Only
// executors append to it: one RateTokensGranted per scheduling pass that hands off executions
// of the bucket, appended at the revision it was decided on, so two executors granting from
// the same bucket at once cannot both spend its last tokens (the loser's append conflicts, and
// it decides again on the stream as stored).
import { z } from 'zod';
import { dateTime } from '../src/input/schemas.ts';
import { EventMetadata, ExecutorRef } from './events.ts';
import { MAX_RATE, type RateLimitPolicy } from './worker-events.ts';

export { MAX_RATE, RateLimitPolicy } from './worker-events.ts';

/** The policy as a bucket decides it: how many per how long. */
export const rateOf = (p: RateLimitPolicy): { limit: number; periodMs: number } =>
  p.perSecond !== undefined ? { limit: p.perSecond, periodMs: 1_000 } : { limit: p.perMinute!, periodMs: 60_000 };

/** How long after its grant a handoff may still be made (src/executor/rate-limits.ts); a token comes back after period + this. */
export const HANDOFF_MARGIN_MS = 100;

/** The window a bucket decides over for a policy: its period and the handoff margin. */
export const windowOf = (p: RateLimitPolicy): { limit: number; windowMs: number } => {
  const { limit, periodMs } = rateOf(p);
  return { limit, windowMs: periodMs + HANDOFF_MARGIN_MS };
};

/** The longest window a grant may claim: a minute and the handoff margin, with room to spare. */
export const MAX_WINDOW_MS = 120_000;

/**
 * `count` tokens taken at `at` (the deciding executor's clock) under a limit of `limit` per
 * `windowMs` (the period plus the margin a handoff has to follow its grant: rate-limits.ts).
 */
export const RateTokensGranted = z.object({
  type: z.literal('RateTokensGranted'),
  data: z.object({
    at: dateTime(),
    count: z.number().int().min(1).max(MAX_RATE),
    limit: z.number().int().min(1).max(MAX_RATE),
    windowMs: z.number().int().min(1).max(MAX_WINDOW_MS),
  }),
  metadata: EventMetadata.extend({ by: ExecutorRef }),
});

export const RateLimitEvent = z.discriminatedUnion('type', [RateTokensGranted]);
export type RateLimitEvent = z.infer<typeof RateLimitEvent>;

export const RATE_LIMIT_STREAM_PREFIX = 'ratelimit-';
export const rateLimitStreamId = (bucket: string) => `${RATE_LIMIT_STREAM_PREFIX}${bucket}`;
export const rateBucketOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(RATE_LIMIT_STREAM_PREFIX) && streamId.length > RATE_LIMIT_STREAM_PREFIX.length ? streamId.slice(RATE_LIMIT_STREAM_PREFIX.length) : undefined;
