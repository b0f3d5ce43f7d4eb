// `baton dlq`: the work transport's dead letters, messages no worker acknowledged within
// max-deliver deliveries (src/transport/work-transport.ts). list and show read them; retry
// publishes one again to its worker; delete drops it. Opens only the transport it needs: NATS
// when BATON_NATS_URL is set (no database), else the Postgres work queue, like the hosts do.
import { Command, InvalidArgumentError, Option } from 'commander';
import { intFrom } from './options.ts';
import { positionOption } from './arguments.ts';
import { UUID } from '../ids.ts';

const messageIdArg = (value: string): string => {
  if (!UUID.test(value)) throw new InvalidArgumentError(`a dead letter's message id is a uuid (see baton dlq list), got "${value}"`);
  return value.toLowerCase();
};
const transportOption = () =>
  new Option('--transport <kind>', 'work transport (default: nats when BATON_NATS_URL is set, else postgres)').choices(['nats', 'postgres']);

export function registerDlqCommand(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('dead letters: work messages no worker acknowledged within max-deliver deliveries (the executor abandons an execution still waiting on one), each with its standing');

  dlq
    .command('list')
    .description('list dead letters, oldest first, each with its standing: settled once its execution moved on without it (a later attempt, or ended otherwise)')
    .addOption(new Option('--limit <n>', 'at most this many (1 to 1000)').argParser(intFrom(1, 1_000)).default(100))
    .option('--after <cursor>', 'continue after this cursor (printed when there are more)', positionOption('--after'))
    .option('--json', 'print JSON: an array of dead letters, each with its cursor, standing, standingReason and executionNow')
    .addOption(transportOption())
    .action(async (o) => (await import('./run/dlq.ts')).dlqListCommand(o));

  dlq
    .command('show')
    .description('show one dead letter')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .option('--json', 'print JSON')
    .addOption(transportOption())
    .action(async (messageId: string, o) => (await import('./run/dlq.ts')).dlqShowCommand(messageId, o));

  dlq
    .command('retry')
    .description('publish a dead letter again to its worker (deliveries start over) and remove it from the dead letters')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .addOption(transportOption())
    .action(async (messageId: string, o) => (await import('./run/dlq.ts')).dlqRetryCommand(messageId, o));

  dlq
    .command('delete')
    .description('remove a dead letter for good')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .addOption(transportOption())
    .action(async (messageId: string, o) => (await import('./run/dlq.ts')).dlqDeleteCommand(messageId, o));
}
