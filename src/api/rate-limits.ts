// Rate limits over GraphQL: `rateLimit(action, key)` says what `baton ratelimit show` says, from
// the same function (src/liveness/rate-limit-wait.ts), with the same refusals naming the argument.
import { ACTION_NAME } from '../actions/action.ts';
import { RateLimitKeyError, rateLimitView } from '../liveness/rate-limit-wait.ts';
import { textArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { badInput } from './errors.ts';

const MAX_KEY_LENGTH = 10_000;

async function rateLimit(_: unknown, a: { action: string; key?: string | null }, ctx: ApiContext) {
  if (a.action.length > 200 || !ACTION_NAME.test(a.action)) throw badInput('action', 'must be an action name like "core.noop"');
  const key = a.key === null || a.key === undefined ? undefined : textArg(a.key, 'key', MAX_KEY_LENGTH);
  try {
    const view = await rateLimitView(ctx.pool, ctx.runtime.store, a.action, key, Date.now());
    if (!view) return null;
    return {
      action: view.action,
      perSecond: view.rateLimit.perSecond ?? null,
      perMinute: view.rateLimit.perMinute ?? null,
      keyPath: view.rateLimit.key ?? null,
      key: view.key,
      bucket: view.bucket,
      windowMs: view.windowMs,
      available: view.available,
      nextTokenAt: view.nextTokenAt,
      granted: view.granted,
      replayedEvents: view.replay.events,
      replayDivergences: view.replay.divergences.length,
    };
  } catch (err) {
    if (err instanceof RateLimitKeyError) throw badInput('key', err.message);
    throw err;
  }
}

export const rateLimitResolvers = { Query: { rateLimit } };
