// `baton ratelimit show <action> [--key <value>]`: an action's rate limit as the executors decide
// it: the policy its workers advertise, and its bucket now (tokens left, when the next comes
// back, tokens granted over the bucket's life), read from the bucket's stream, and that stream
// replayed through the current machine (no divergence expected). GraphQL `rateLimit` says the same.
import { InvalidArgumentError, type Command } from 'commander';
import { ACTION_NAME } from '../actions/action.ts';
import { rateLimitView } from '../liveness/rate-limit-wait.ts';
import { textOption } from './arguments.ts';
import { readContext } from './context.ts';
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
      await readContext(async ({ pool, store }) => {
        const view = await rateLimitView(pool, store, action, o.key, Date.now());
        if (o.json) {
          console.log(toJson(view ?? { action, rateLimit: null }));
          return;
        }
        if (!view) {
          // What workers advertise is read from the read model: with no projector running, none is known.
          console.log(`no worker advertises a rate limit for action "${action}" (as the read model knows it: its workers table is kept by the projector)`);
          return;
        }
        const p = view.rateLimit;
        const limit = p.perSecond ?? p.perMinute;
        console.log(
          fields([
            ['action', action],
            ['limit', `${limit} per ${p.perSecond !== undefined ? 'second' : 'minute'}${p.key ? ` per ${p.key}` : ''}`],
            ['bucket', view.bucket],
            ['available', `${view.available} of ${limit}`],
            ['next token', view.nextTokenAt],
            ['granted', String(view.granted)],
            ['replay', view.replay.divergences.length === 0 ? `${view.replay.events} events, no divergence` : `${view.replay.divergences.length} divergences: ${JSON.stringify(view.replay.divergences)}`],
          ]),
        );
      });
    });
}
