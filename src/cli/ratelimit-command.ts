// `baton ratelimit show <action> [--key <value>]`: an action's rate limit as the executors decide
// it: the policy its workers advertise, and its bucket now (tokens left, when the next comes
// back, tokens granted over the bucket's life), read from the bucket's stream, and that stream
// replayed through the current machine (no divergence expected).
import { InvalidArgumentError, type Command } from 'commander';
import { tokensAt } from '../../actors/rate-bucket.machine.ts';
import { rateLimitStreamId, windowOf } from '../../schemas/rate-limit-events.ts';
import { ACTION_NAME } from '../actions/action.ts';
import { BatonError } from '../errors.ts';
import { advertisedRateLimits } from '../liveness/rate-limit-wait.ts';
import { RateBuckets, rateBucketOf, replayRateBucket } from '../runtime/rate-buckets.ts';
import { textOption } from './arguments.ts';
import { withContext } from './context.ts';
import { fields, toJson } from './format.ts';

const actionName = (value: string): string => {
  if (value.length > 200 || !ACTION_NAME.test(value)) throw new InvalidArgumentError(`action must be a name like "core.noop", got "${value.slice(0, 80)}"`);
  return value;
};

export function registerRateLimitCommands(program: Command): void {
  const ratelimit = program.command('ratelimit').description("rate limits: an action's limit as its workers advertise it, and its bucket now");
  ratelimit
    .command('show')
    .description("show an action's rate limit and its bucket (with --key, the bucket of that key's value)")
    .argument('<action>', 'action name, e.g. mail.send', actionName)
    .option('--key <value>', "the value of the action's key path, for a limit per key", textOption('--key', 10_000))
    .option('--json', 'print JSON')
    .action(async (action: string, o: { key?: string; json?: boolean }) => {
      await withContext(async ({ pool, store }) => {
        const policy = (await advertisedRateLimits(pool, [action])).get(action);
        if (!policy) {
          if (o.json) console.log(toJson({ action, rateLimit: null }));
          else console.log(`no worker advertises a rate limit for action "${action}"`);
          return;
        }
        if (o.key !== undefined && policy.key === undefined) throw new BatonError(`--key: action "${action}" is limited as a whole, not per key`);
        const input = o.key === undefined || policy.key === undefined ? undefined : policy.key.split('.').reduceRight<unknown>((v, part) => ({ [part]: v }), o.key);
        const bucket = rateBucketOf(action, policy, () => input);
        const { limit, windowMs } = windowOf(policy);
        const held = await new RateBuckets(store).catchUp(bucket);
        // The history the decision stands on, replayed through the current machine.
        const replay = replayRateBucket(bucket, await store.readStream(rateLimitStreamId(bucket)));
        const now = Date.now();
        const t = tokensAt(held.snapshot, limit, windowMs, now);
        const view = {
          action,
          rateLimit: policy,
          bucket,
          key: o.key ?? null,
          windowMs,
          available: t.available,
          nextTokenAt: t.nextAt === undefined ? null : new Date(t.nextAt).toISOString(),
          granted: held.snapshot.context.granted,
          revision: held.revision === undefined ? null : String(held.revision),
          replay: { events: replay.events, divergences: replay.divergences },
        };
        if (o.json) {
          console.log(toJson(view));
          return;
        }
        console.log(
          fields([
            ['action', action],
            ['limit', `${policy.perSecond ?? policy.perMinute} per ${policy.perSecond !== undefined ? 'second' : 'minute'}${policy.key ? ` per ${policy.key}` : ''}`],
            ['bucket', bucket],
            ['available', `${t.available} of ${limit}`],
            ['next token', view.nextTokenAt],
            ['granted', String(view.granted)],
            ['replay', replay.divergences.length === 0 ? `${replay.events} events, no divergence` : `${replay.divergences.length} divergences: ${JSON.stringify(replay.divergences)}`],
          ]),
        );
      });
    });
}
