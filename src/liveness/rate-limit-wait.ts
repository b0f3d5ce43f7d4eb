// Whether an execution waits for a rate-limit token, told from what exists: the policy the latest
// worker to offer its action advertised (the read model's workers table, as the executor reads
// it from the worker streams) and the bucket's stream now. Nothing is kept by hand for it.
import type pg from 'pg';
import { READ_MODEL_SCHEMA } from '../../projections/index.ts';
import { qualified } from '../../projections/rows.ts';
import { RateLimitPolicy, windowOf } from '../../schemas/rate-limit-events.ts';
import { RateBuckets, rateBucketOf } from '../runtime/rate-buckets.ts';

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
