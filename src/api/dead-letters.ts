// The work transport's dead letters over GraphQL: the deadLetters query and the retryDeadLetter
// and deleteDeadLetter mutations. They read the transport, not the read model, so they work only when the server was
// given one (startApiServer's `transport`); otherwise they say so.
import { retryDeadLetter as retryDeadLetterChecked } from '../runtime/dead-letter-retry.ts';
import { standingsOf, type DeadLetterStanding } from '../runtime/dead-letter-standing.ts';
import type { DeadLetter, WorkTransport } from '../transport/work-transport.ts';
import { bigintTextProblem } from '../input/rules.ts';
import { MAX_PAGE_SIZE, intInRange } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { notOurCursor } from './cursor.ts';
import { ApiError, badInput } from './errors.ts';
import { encodePrefixedCursor, parsePrefixedCursor } from './opaque-cursor.ts';
import { UUID } from '../ids.ts';

// A transport cursor is a decimal position; the API's is that, prefixed and base64url'd
// (opaque-cursor.ts), so clients treat it as opaque (as they do the executions cursors).
const CURSOR_PREFIX = 'dead-letter:';
const MAX_CURSOR_LENGTH = 64;

export const encodeDeadLetterCursor = (transportCursor: string): string => encodePrefixedCursor(CURSOR_PREFIX, transportCursor);

/** Throws BAD_USER_INPUT naming `after` for anything this API did not hand out. */
export function decodeDeadLetterCursor(value: string): string {
  const position = parsePrefixedCursor(CURSOR_PREFIX, value, MAX_CURSOR_LENGTH);
  // A position within Postgres's bigint: 19 digits can go past it.
  if (position === undefined || bigintTextProblem(position)) throw notOurCursor('dead-letter');
  return position;
}

function transportOf(ctx: ApiContext): WorkTransport {
  if (!ctx.transport) {
    throw new ApiError(
      'NOT_CONFIGURED',
      'dead letters live in the work transport, and this API server was started without a work transport, so it can neither list nor retry them',
    );
  }
  return ctx.transport;
}

function messageIdArg(value: string): string {
  if (!UUID.test(value)) throw badInput('messageId', "must be a dead letter's message id (a UUID)");
  return value.toLowerCase();
}

/** The GraphQL DeadLetter: the port's, with the message's fields brought up; `standing` read when asked for. */
const toNode = (d: DeadLetter) => ({
  letter: d,
  messageId: d.messageId,
  executionId: d.message.executionId,
  workerId: d.workerId,
  runtime: d.message.runtime,
  action: d.message.action,
  attempt: d.message.attempt,
  deliveries: d.deliveries,
  reason: d.reason,
  deadLetteredAt: d.deadLetteredAt,
  publishedAt: d.message.publishedAt,
});
type DeadLetterNode = ReturnType<typeof toNode> & { standing?: () => Promise<DeadLetterStanding> };

/**
 * Read from the event store when first asked for, once per node; a listed page reads all its
 * nodes' together (standingsOf bounds the loads in flight), not one load per field per node.
 */
function standingOfNode(node: DeadLetterNode, ctx: ApiContext): Promise<DeadLetterStanding> {
  if (!node.standing) {
    const once = standingsOf(ctx.runtime, [node.letter]).then(([s]) => s!);
    node.standing = () => once;
  }
  return node.standing();
}
function withPageStandings(nodes: DeadLetterNode[], ctx: ApiContext): DeadLetterNode[] {
  let page: Promise<DeadLetterStanding[]> | undefined;
  nodes.forEach((n, i) => (n.standing = () => (page ??= standingsOf(ctx.runtime, nodes.map((x) => x.letter))).then((all) => all[i]!)));
  return nodes;
}
const STANDING_ENUM = { outstanding: 'Outstanding', settled: 'Settled' } as const;

async function deadLetters(_: unknown, a: { first: number; after?: string | null }, ctx: ApiContext) {
  const first = intInRange(a.first, 'first', 1, MAX_PAGE_SIZE);
  const after = a.after == null ? undefined : decodeDeadLetterCursor(a.after);
  const transport = transportOf(ctx);
  const page = await transport.listDeadLetters({ limit: first + 1, ...(after !== undefined && { after }) });
  const nodes = withPageStandings(page.slice(0, first).map(toNode), ctx);
  const edges = nodes.map((node) => ({ cursor: encodeDeadLetterCursor(node.letter.cursor), node }));
  return { edges, pageInfo: { hasNextPage: page.length > first, endCursor: edges.at(-1)?.cursor ?? null } };
}

async function retryDeadLetter(_: unknown, a: { messageId: string }, ctx: ApiContext) {
  const messageId = messageIdArg(a.messageId);
  const d = await retryDeadLetterChecked(transportOf(ctx), ctx.runtime, messageId); // NotFoundError → NOT_FOUND; final → CONFLICT
  ctx.log.info({ messageId, executionId: d.message.executionId, workerId: d.workerId }, 'dead letter retried');
  return toNode(d);
}

/** Gone for good: the message is not published again (the executor already abandoned the execution). */
async function deleteDeadLetter(_: unknown, a: { messageId: string }, ctx: ApiContext) {
  const messageId = messageIdArg(a.messageId);
  const d = await transportOf(ctx).deleteDeadLetter(messageId); // NotFoundError → NOT_FOUND
  ctx.log.info({ messageId, executionId: d.message.executionId, workerId: d.workerId }, 'dead letter deleted');
  return toNode(d);
}

export const deadLetterResolvers = {
  Query: { deadLetters },
  Mutation: { retryDeadLetter, deleteDeadLetter },
  DeadLetter: {
    execution: (node: DeadLetterNode, _a: unknown, ctx: ApiContext) => ctx.loaders.execution.load(node.executionId.toLowerCase()),
    standing: async (node: DeadLetterNode, _a: unknown, ctx: ApiContext) => STANDING_ENUM[(await standingOfNode(node, ctx)).standing],
    standingReason: async (node: DeadLetterNode, _a: unknown, ctx: ApiContext) => (await standingOfNode(node, ctx)).reason,
  },
};
