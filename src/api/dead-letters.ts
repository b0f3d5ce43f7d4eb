// The work transport's dead letters over GraphQL: the deadLetters query and the retryDeadLetter
// and deleteDeadLetter mutations. They read the transport, not the read model, so they work only when the server was
// given one (startApiServer's `transport`); otherwise they say so.
import { retryDeadLetter as retryDeadLetterChecked } from '../runtime/dead-letter-retry.ts';
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

/** The GraphQL DeadLetter: the port's, with the message's fields brought up. */
const toNode = (d: DeadLetter) => ({
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
type DeadLetterNode = ReturnType<typeof toNode>;

async function deadLetters(_: unknown, a: { first: number; after?: string | null }, ctx: ApiContext) {
  const first = intInRange(a.first, 'first', 1, MAX_PAGE_SIZE);
  const after = a.after == null ? undefined : decodeDeadLetterCursor(a.after);
  const transport = transportOf(ctx);
  const page = await transport.listDeadLetters({ limit: first + 1, ...(after !== undefined && { after }) });
  const edges = page.slice(0, first).map((d) => ({ cursor: encodeDeadLetterCursor(d.cursor), node: toNode(d) }));
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
  },
};
