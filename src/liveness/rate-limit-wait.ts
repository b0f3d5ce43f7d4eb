// Whether an execution waits for a rate-limit token, told from what exists: the policy the latest
// worker to offer its action advertised (the read model's workers table, as the executor reads
// it from the worker streams) and the bucket's stream now. Nothing is kept by hand for it.
import type pg from 'pg';
import { READ_MODEL_SCHEMA } from '../../projections/index.ts';
import { qualified } from '../../projections/rows.ts';
import { tokensAt } from '../../actors/rate-bucket.machine.ts';
import { RateLimitPolicy, rateLimitStreamId, windowOf } from '../../schemas/rate-limit-events.ts';
import { BatonError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { RateBuckets, rateBucketOf, replayRateBucket, type RateBucketReplay } from '../runtime/rate-buckets.ts';
import { namespaceRateBucket } from '../executor/namespace-rate-limits.ts';

const WORKERS = qualified(READ_MODEL_SCHEMA, 'workers');

/** Per action asked for, the rate limit its latest advertising worker set (absent: none). */
export async function advertisedRateLimits(pool: pg.Pool, actions: readonly string[]): Promise<Map<string, RateLimitPolicy>> {
  if (actions.length === 0) return new Map();
  const r = await pool.query<{ action: string; policy: unknown }>(
    `SELECT a.action, p.policy FROM unnest($1::text[]) AS a(action)
       CROSS JOIN LATERAL (
         SELECT w.policies -> a.action -> 'rateLimit' AS policy FROM ${WORKERS} w
          WHERE a.action = ANY(w.actions) AND w.started_position IS NOT NULL
          ORDER BY w.started_position DESC LIMIT 1
       ) p
      WHERE p.policy IS NOT NULL`,
    [actions],
  );
  const out = new Map<string, RateLimitPolicy>();
  for (const row of r.rows) {
    const parsed = RateLimitPolicy.safeParse(row.policy);
    if (parsed.success) out.set(row.action, parsed.data);
  }
  return out;
}

const describe = (p: RateLimitPolicy) => `${p.perSecond ?? p.perMinute} per ${p.perSecond !== undefined ? 'second' : 'minute'}${p.key ? ` per ${p.key}` : ''}`;

/**
 * `rate limited: action "x" allows 5 per second; next token at <time>` when the execution's
 * bucket has no token left now, else null (a token is there: it waits only for its turn).
 */
export async function rateLimitReason(buckets: RateBuckets, e: { action: string; input: () => unknown }, policy: RateLimitPolicy | undefined, now: number): Promise<string | null> {
  if (!policy) return null;
  const tokens = await buckets.tokens(rateBucketOf(e.action, policy, e.input), windowOf(policy), now);
  if (tokens.available > 0) return null;
  return `rate limited: action "${e.action}" allows ${describe(policy)}; next token at ${new Date(tokens.nextAt!).toISOString()}`;
}

/**
 * `rate limited: namespace "team-a" allows 100 per second; next token at <time>` when the
 * execution's namespace has a rate limit (BATON_NAMESPACE_RATE_LIMIT) whose bucket has no token
 * left now, else null.
 */
export async function namespaceRateLimitReason(buckets: RateBuckets, namespace: string, limits: Readonly<Record<string, RateLimitPolicy>>, now: number): Promise<string | null> {
  const policy = limits[namespace];
  if (!policy) return null;
  const tokens = await buckets.tokens(namespaceRateBucket(namespace), windowOf(policy), now);
  if (tokens.available > 0) return null;
  return `rate limited: namespace "${namespace}" allows ${describe(policy)}; next token at ${new Date(tokens.nextAt!).toISOString()}`;
}

/** An action's rate limit and its bucket now: what `baton ratelimit show` and GraphQL `rateLimit` say. */
export interface RateLimitView {
  action: string;
  rateLimit: RateLimitPolicy;
  bucket: string;
  /** The key's value asked about; null for the action's shared bucket. */
  key: string | null;
  windowMs: number;
  available: number;
  nextTokenAt: string | null;
  granted: number;
  revision: string | null;
  replay: { events: number; divergences: RateBucketReplay['divergences'] };
}

/** A question about a bucket that cannot be answered: `--key` / `key` for an action limited as a whole. */
export class RateLimitKeyError extends BatonError {}

/** Null when no worker advertises a rate limit for the action. Reads the bucket's stream once, and replays it through the machine. */
export async function rateLimitView(pool: pg.Pool, store: EventStore, action: string, key: string | undefined, now: number): Promise<RateLimitView | null> {
  const policy = (await advertisedRateLimits(pool, [action])).get(action);
  if (!policy) return null;
  if (key !== undefined && policy.key === undefined) throw new RateLimitKeyError(`action "${action}" is limited as a whole, not per key`);
  // The input a key value stands for: the value at the key's path.
  const input = key === undefined || policy.key === undefined ? undefined : policy.key.split('.').reduceRight<unknown>((v, part) => ({ [part]: v }), key);
  const bucket = rateBucketOf(action, policy, () => input);
  const { limit, windowMs } = windowOf(policy);
  const stored = await store.readStream(rateLimitStreamId(bucket));
  const replay = replayRateBucket(bucket, stored);
  const held = await new RateBuckets(store).catchUp(bucket);
  const t = tokensAt(held.snapshot, limit, windowMs, now);
  return {
    action,
    rateLimit: policy,
    bucket,
    key: key ?? null,
    windowMs,
    available: t.available,
    nextTokenAt: t.nextAt === undefined ? null : new Date(t.nextAt).toISOString(),
    granted: held.snapshot.context.granted,
    revision: held.revision === undefined ? null : String(held.revision),
    replay: { events: replay.events, divergences: replay.divergences },
  };
}
