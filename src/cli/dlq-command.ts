// `baton dlq`: the work transport's dead letters, messages no worker acknowledged within
// max-deliver deliveries (src/transport/work-transport.ts). list and show read them; retry
// publishes one again to its worker; delete drops it. Opens only the transport it needs: NATS
// when BATON_NATS_URL is set (no database), else the Postgres work queue, like the hosts do.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Logger } from 'pino';
import { loadConfig } from '../config.ts';
import { openDatabase } from '../db/connect.ts';
import { ConfigError } from '../errors.ts';
import { createLogger } from '../log.ts';
import { connectNats, createNatsWorkTransport } from '../transport/nats.ts';
import { createPostgresWorkTransport } from '../transport/postgres.ts';
import type { DeadLetter, WorkTransport } from '../transport/work-transport.ts';
import { positionOption } from './arguments.ts';
import { fields, table, toJson } from './format.ts';

type TransportKind = 'nats' | 'postgres';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const messageIdArg = (value: string): string => {
  if (!UUID.test(value)) throw new InvalidArgumentError(`a dead letter's message id is a uuid (see baton dlq list), got "${value}"`);
  return value.toLowerCase();
};
const limitArg = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1_000) throw new InvalidArgumentError('must be an integer from 1 to 1000');
  return n;
};
const transportOption = () =>
  new Option('--transport <kind>', 'work transport (default: nats when BATON_NATS_URL is set, else postgres)').choices(['nats', 'postgres']);

/** Open the transport, run `fn`, close everything again. */
async function withTransport<T>(kind: TransportKind | undefined, fn: (transport: WorkTransport, log: Logger) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const log = createLogger(config, { destination: 'stderr' }).child({ component: 'dlq' });
  const use = kind ?? (config.natsUrl ? 'nats' : 'postgres');
  if (use === 'nats') {
    if (!config.natsUrl) throw new ConfigError('--transport nats needs BATON_NATS_URL (e.g. nats://127.0.0.1:4222)');
    const nc = await connectNats(config.natsUrl, log);
    try {
      const transport = await createNatsWorkTransport(nc, { log });
      try {
        return await fn(transport, log);
      } finally {
        await transport.close();
      }
    } finally {
      await nc.drain();
    }
  }
  const db = await openDatabase(config, log, { max: 2, applicationName: 'baton-dlq' });
  try {
    const transport = createPostgresWorkTransport(db.pool, { log });
    try {
      return await fn(transport, log);
    } finally {
      await transport.close();
    }
  } finally {
    await db.close();
  }
}

function describe(d: DeadLetter): string {
  return fields([
    ['message', d.messageId],
    ['execution', d.message.executionId],
    ['action', d.message.action],
    ['attempt', String(d.message.attempt)],
    ['worker', d.workerId],
    ['runtime', d.message.runtime],
    ['deliveries', String(d.deliveries)],
    ['reason', d.reason],
    ['dead since', d.deadLetteredAt],
    ['published', d.message.publishedAt],
    ['handoff revision', d.message.handoffRevision],
  ]);
}

export function registerDlqCommand(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('dead letters: work messages no worker acknowledged within max-deliver deliveries (their executions are failed)');

  dlq
    .command('list')
    .description('list dead letters, oldest first')
    .addOption(new Option('--limit <n>', 'at most this many (1 to 1000)').argParser(limitArg).default(100))
    .option('--after <cursor>', 'continue after this cursor (printed when there are more)', positionOption('--after'))
    .option('--json', 'print JSON: an array of dead letters, each with its cursor')
    .addOption(transportOption())
    .action(async (o: { limit: number; after?: string; json?: boolean; transport?: TransportKind }) => {
      await withTransport(o.transport, async (transport) => {
        // One more than asked for, to know whether to say there are more.
        const page = await transport.listDeadLetters({ limit: Math.min(o.limit + 1, 1_000), ...(o.after !== undefined && { after: o.after }) });
        const shown = page.slice(0, o.limit);
        const more = page.length > o.limit || (page.length === 1_000 && o.limit === 1_000);
        if (o.json) return console.log(toJson(shown));
        if (shown.length === 0) return console.log(o.after === undefined ? 'no dead letters' : 'no more dead letters');
        console.log(
          table(
            ['MESSAGE', 'EXECUTION', 'ACTION', 'WORKER', 'DELIVERIES', 'DEAD SINCE'],
            shown.map((d) => [d.messageId, d.message.executionId, d.message.action, d.workerId, String(d.deliveries), d.deadLetteredAt]),
          ),
        );
        if (more) process.stderr.write(`more: baton dlq list --after ${shown.at(-1)!.cursor}\n`);
      });
    });

  dlq
    .command('show')
    .description('show one dead letter')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .option('--json', 'print JSON')
    .addOption(transportOption())
    .action(async (messageId: string, o: { json?: boolean; transport?: TransportKind }) => {
      await withTransport(o.transport, async (transport) => {
        const d = await transport.getDeadLetter(messageId);
        if (!d) {
          process.stderr.write(`baton: dead letter ${messageId} not found\n`);
          process.exitCode = 1;
          return;
        }
        console.log(o.json ? toJson(d) : describe(d));
      });
    });

  dlq
    .command('retry')
    .description('publish a dead letter again to its worker (deliveries start over) and remove it from the dead letters')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .addOption(transportOption())
    .action(async (messageId: string, o: { transport?: TransportKind }) => {
      await withTransport(o.transport, async (transport) => {
        const d = await transport.retryDeadLetter(messageId); // NotFoundError: "dead letter … not found", exit 1
        console.log(`published again: ${d.messageId} (execution ${d.message.executionId}, action ${d.message.action}) to worker ${d.workerId}`);
      });
    });

  dlq
    .command('delete')
    .description('remove a dead letter for good')
    .argument('<messageId>', 'its message id (from baton dlq list)', messageIdArg)
    .addOption(transportOption())
    .action(async (messageId: string, o: { transport?: TransportKind }) => {
      await withTransport(o.transport, async (transport) => {
        const d = await transport.deleteDeadLetter(messageId);
        console.log(`deleted: ${d.messageId} (execution ${d.message.executionId}, action ${d.message.action})`);
      });
    });
}
