// What `baton dlq list | show | retry | delete` do (their options are defined in dlq-command.ts).
// Opens the transport the hosts use: NATS when BATON_NATS_URL is set (the database only for the
// installation's stream names), else the Postgres work queue.
import type { Logger } from 'pino';
import { openDatabase } from '../../db/connect.ts';
import { ConfigError } from '../../errors.ts';
import { connectNats, createNatsWorkTransport } from '../../transport/nats/index.ts';
import { natsNamesOf } from '../../transport/nats/installation-names.ts';
import { createPostgresWorkTransport } from '../../transport/postgres/index.ts';
import type { DeadLetter, WorkTransport } from '../../transport/work-transport.ts';
import { cliConfig, cliLogger, readContext, withContext } from '../context.ts';
import { retryDeadLetter } from '../../runtime/dead-letter-retry.ts';
import { standingsOf, type DeadLetterStanding } from '../../runtime/dead-letter-standing.ts';
import { fields, table, toJson } from '../format.ts';

export type TransportKind = 'nats' | 'postgres';

/** Open the transport, run `fn`, close everything again. */
/**
 * Where the dead letters were looked for, for an answer that finds none: an operator's shell
 * without BATON_NATS_URL reads the Postgres queue, which holds none of a NATS installation's.
 */
const POSTGRES_QUEUE = 'in the Postgres work queue (a NATS installation\'s are read with BATON_NATS_URL set, or --transport nats)';

async function withTransport<T>(kind: TransportKind | undefined, fn: (transport: WorkTransport, log: Logger, where: string) => Promise<T>): Promise<T> {
  const config = cliConfig();
  const log = cliLogger(config); // its component names the command: cli/dlq/list, …
  const use = kind ?? (config.natsUrl ? 'nats' : 'postgres');
  if (use === 'nats') {
    if (!config.natsUrl) throw new ConfigError('--transport nats needs BATON_NATS_URL (e.g. nats://127.0.0.1:4222)');
    const db = await openDatabase(config, log, { max: 1, applicationName: 'baton-dlq' });
    const names = await natsNamesOf(db.pool, db.embeddedClusterDir).finally(() => db.close());
    const nc = await connectNats(config.natsUrl, log);
    try {
      const transport = await createNatsWorkTransport(nc, { log, ...names });
      try {
        return await fn(transport, log, `on NATS (stream ${names.streamName}_DLQ)`);
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
      return await fn(transport, log, POSTGRES_QUEUE);
    } finally {
      await transport.close();
    }
  } finally {
    await db.close();
  }
}

function describe(d: DeadLetter, st: DeadLetterStanding): string {
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
    ['standing', `${st.standing}: ${st.reason}`],
  ]);
}

/** A dead letter as --json prints it: the port's, with its standing (dead-letter-standing.ts). */
const withStanding = (d: DeadLetter, st: DeadLetterStanding) => ({ ...d, standing: st.standing, standingReason: st.reason, executionNow: st.execution });
const executionNow = (st: DeadLetterStanding) => (st.execution ? `${st.execution.status} (attempt ${st.execution.attempt})` : 'not stored');

// list and show read each dead letter's execution from the event store (withContext) to say
// whether it still stands: one whose execution moved on since is settled, not dead work.
export async function dlqListCommand(o: { limit: number; after?: string; json?: boolean; transport?: TransportKind }): Promise<void> {
  await readContext(({ runtime }) =>
    withTransport(o.transport, async (transport, _log, where) => {
      // One more than asked for, to know whether to say there are more.
      const page = await transport.listDeadLetters({ limit: Math.min(o.limit + 1, 1_000), ...(o.after !== undefined && { after: o.after }) });
      const shown = page.slice(0, o.limit);
      const more = page.length > o.limit || (page.length === 1_000 && o.limit === 1_000);
      const standings = await standingsOf(runtime, shown);
      if (o.json) return console.log(toJson(shown.map((d, i) => withStanding(d, standings[i]!))));
      if (shown.length === 0) return console.log(`${o.after === undefined ? 'no dead letters' : 'no more dead letters'} ${where}`);
      console.log(
        table(
          ['MESSAGE', 'EXECUTION', 'ACTION', 'WORKER', 'DELIVERIES', 'DEAD SINCE', 'STANDING', 'EXECUTION NOW'],
          shown.map((d, i) => [d.messageId, d.message.executionId, d.message.action, d.workerId, String(d.deliveries), d.deadLetteredAt, standings[i]!.standing, executionNow(standings[i]!)]),
        ),
      );
      const settled = standings.filter((st) => st.standing === 'settled').length;
      if (settled > 0) process.stderr.write(`${settled} of these settled: their executions moved on without them (baton dlq show <message> says how; delete them when done)\n`);
      if (more) process.stderr.write(`more: baton dlq list --after ${shown.at(-1)!.cursor}\n`);
    }),
  );
}

export async function dlqShowCommand(messageId: string, o: { json?: boolean; transport?: TransportKind }): Promise<void> {
  await readContext(({ runtime }) =>
    withTransport(o.transport, async (transport, _log, where) => {
      const d = await transport.getDeadLetter(messageId);
      if (!d) {
        process.stderr.write(`baton: dead letter ${messageId} not found ${where}\n`);
        process.exitCode = 1;
        return;
      }
      const [st] = await standingsOf(runtime, [d]);
      console.log(o.json ? toJson(withStanding(d, st!)) : describe(d, st!));
    }),
  );
}

export async function dlqRetryCommand(messageId: string, o: { transport?: TransportKind }): Promise<void> {
  await withContext(({ runtime }) =>
    withTransport(o.transport, async (transport) => {
      // NotFoundError: "dead letter … not found"; a final execution: refused, the dead letter kept (exit 1).
      const d = await retryDeadLetter(transport, runtime, messageId);
      console.log(`published again: ${d.messageId} (execution ${d.message.executionId}, action ${d.message.action}) to worker ${d.workerId}`);
    }),
  );
}

export async function dlqDeleteCommand(messageId: string, o: { transport?: TransportKind }): Promise<void> {
  await withTransport(o.transport, async (transport) => {
    const d = await transport.deleteDeadLetter(messageId);
    console.log(`deleted: ${d.messageId} (execution ${d.message.executionId}, action ${d.message.action})`);
  });
}
