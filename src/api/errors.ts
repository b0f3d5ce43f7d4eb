// What a client sees when something goes wrong: a message that names the bad argument and an
// `extensions.code`, never a stack trace or SQL. Resolvers throw Baton's typed errors (or
// `badInput`); `maskApiError` (yoga's maskedErrors hook) turns each into a coded GraphQLError,
// a database outage into SERVICE_UNAVAILABLE (HTTP 503), and anything else into yoga's masked
// "Unexpected error.".
import { DeadLetterNotRetriableError } from '../runtime/dead-letter-retry.ts';
import type { GraphQLError } from 'graphql';
import type { Role } from './auth.ts';
import { seesServerDetails } from './redact.ts';
import { createGraphQLError, maskError as yogaMaskError } from 'graphql-yoga';
import { InvalidActionInputError } from '../actions/action.ts';
import {
  BatonError,
  IdempotencyKeyConflictError,
  InvalidEventError,
  NotFoundError,
  RejectedCommandError,
} from '../errors.ts';
import { InvalidInputError } from '../input/errors.ts';
import { UnknownMachineVersionError, knownMachineVersions } from '../../actors/execution-machine-versions.ts';
import { ArchivedError } from '../retention/archived-history.ts';
import { WorkflowIdConflictError } from '../workflow/service.ts';

/** Each refused field as `{ path, message }`, the shape every refusal's `problems` has. */
export const problemsOf = (issues: readonly { path: string; message: string }[]) => issues.map(({ path, message }) => ({ path, message }));

export type ApiErrorCode =
  | 'BAD_USER_INPUT'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'IDEMPOTENCY_CONFLICT'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  /** The server was started without what the field needs (dead letters without a work transport). */
  | 'NOT_CONFIGURED'
  /** The response would pass BATON_API_MAX_RESPONSE_BYTES. */
  | 'RESPONSE_TOO_LARGE'
  /** A per-client or server-wide cap (subscriptions) is reached: try again once one is free. */
  | 'LIMIT_EXCEEDED'
  | 'SERVICE_UNAVAILABLE'
  /** Retention archived it: no longer in the store; extensions say when and where (src/retention/), and why the file could not be read (`unreadable`, `reason`). */
  | 'ARCHIVED'
  /** The history names an execution machine version this server's build does not have (a newer Baton wrote it): upgrade the server. */
  | 'UNKNOWN_MACHINE_VERSION';

const HTTP_STATUS: Partial<Record<ApiErrorCode, number>> = {
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  LIMIT_EXCEEDED: 429,
  SERVICE_UNAVAILABLE: 503,
};

/** An error meant for the client: its message is shown as is. */
export class ApiError extends BatonError {
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    /** The argument at fault (`first`, `after`, `input.ms`), also in extensions.argument. */
    readonly argument?: string,
    /** More for extensions (a workflow's `problems`, each with its path). */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** A bad argument: the message starts with its name (`first: must be from 1 to 100`). */
export const badInput = (argument: string, problem: string) => new ApiError('BAD_USER_INPUT', `${argument}: ${problem}`, argument);

/** A GraphQLError with a code, and an HTTP status for the codes that have one. */
export function codedError(code: ApiErrorCode, message: string, extra: Record<string, unknown> = {}, located?: GraphQLError): GraphQLError {
  const status = HTTP_STATUS[code];
  return createGraphQLError(message, {
    ...(located && { nodes: located.nodes, source: located.source, positions: located.positions, path: located.path }),
    extensions: { code, ...extra, ...(status !== undefined && { http: { status, ...(extra['http'] as object | undefined) } }) },
  });
}

// pg error classes: 08 connection exception, 57P admin shutdown / crash / cannot connect now,
// 53 insufficient resources (too many connections, out of memory, disk full).
const OUTAGE_SQLSTATE = /^(08|57P|53)/;
const OUTAGE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
// node-postgres reports a dropped connection or a pool checkout timeout with these messages only.
const OUTAGE_MESSAGES = [/^Connection terminated/, /timeout exceeded when trying to connect/i, /Client has encountered a connection error/];

/** The database could not be reached or refused work for lack of resources: worth retrying later. */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (depth > 5 || typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown; originalError?: unknown };
  if (typeof e.code === 'string' && (OUTAGE_NODE_CODES.has(e.code) || (e.code.length === 5 && OUTAGE_SQLSTATE.test(e.code)))) return true;
  if (typeof e.message === 'string' && OUTAGE_MESSAGES.some((m) => m.test(e.message as string))) return true;
  // Node's happy-eyeballs connect gives an AggregateError; wrappers keep the pg error as cause.
  const inner = [e.cause, e.originalError, ...(Array.isArray(e.errors) ? e.errors : [])];
  return inner.some((x) => isDatabaseUnavailable(x, depth + 1));
}

/** Baton's typed error → code and client-safe message; undefined for errors that must be masked. */
export function describeApiError(err: unknown): { code: ApiErrorCode; message: string; extra: Record<string, unknown> } | undefined {
  if (err instanceof ArchivedError) {
    const a = err.archived;
    // `archive` is the path the archiving process wrote, as README and the schema document it
    // (ArchivedHistory.archive): what an operator needs to put the file back.
    const unreadable = err.unreadable && { unreadable: err.unreadable.problem, reason: err.unreadable.reason };
    return { code: 'ARCHIVED', message: err.message, extra: { kind: err.kind, id: err.id, archivedAt: a.archivedAt.toISOString(), lastEventAt: a.lastEventAt.toISOString(), events: a.events, archive: a.archive, ...unreadable } };
  }
  if (err instanceof ApiError) return { code: err.code, message: err.message, extra: { ...(err.argument && { argument: err.argument }), ...err.extra } };
  if (err instanceof InvalidInputError) {
    const problems = problemsOf(err.problems);
    // The lists of what may be chosen (every registered action, for an unknown one) stay out:
    // only a resolver knows the caller's role, and it adds them for admins (knownFor).
    return { code: 'BAD_USER_INPUT', message: err.describe({ listKnown: false }), extra: { argument: err.argument, problems } };
  }
  if (err instanceof InvalidActionInputError) {
    // `problems` as every other refusal has them; `issues` kept for clients that read it.
    return { code: 'BAD_USER_INPUT', message: err.issues.map((i) => `${i.path}: ${i.message}`).join('; '), extra: { argument: 'input', problems: problemsOf(err.issues), issues: err.issues } };
  }
  if (err instanceof InvalidEventError) return { code: 'BAD_USER_INPUT', message: err.message, extra: { problems: problemsOf(err.issues), issues: err.issues } };
  if (err instanceof IdempotencyKeyConflictError) {
    return { code: 'IDEMPOTENCY_CONFLICT', message: err.message, extra: { argument: 'idempotencyKey', executionId: err.executionId } };
  }
  if (err instanceof WorkflowIdConflictError) return { code: 'IDEMPOTENCY_CONFLICT', message: err.message, extra: { argument: 'id', workflowId: err.workflowId } };
  if (err instanceof NotFoundError) return { code: 'NOT_FOUND', message: err.message, extra: {} };
  if (err instanceof UnknownMachineVersionError) {
    return { code: 'UNKNOWN_MACHINE_VERSION', message: err.message, extra: { machineVersion: err.machineVersion, knownVersions: knownMachineVersions(), newer: err.newer, ...(err.at && { executionId: err.at.executionId, revision: err.at.revision }) } };
  }
  if (err instanceof RejectedCommandError) return { code: 'CONFLICT', message: err.message, extra: { state: err.state } };
  if (err instanceof DeadLetterNotRetriableError) return { code: 'CONFLICT', message: err.message, extra: { executionId: err.executionId } };
  return undefined;
}

// graphql can be loaded twice, as its ESM and its CJS build (vitest does: ESM for our code, CJS
// for yoga's), and then instanceof fails across the two; the name does not.
const asGraphQLError = (e: unknown): GraphQLError | undefined => (e instanceof Error && e.name === 'GraphQLError' ? (e as GraphQLError) : undefined);

/** yoga's `maskedErrors.maskError`. Never passes isDev on: development mode must not leak either. */
export function maskApiError(error: unknown, fallbackMessage: string): Error {
  const located = asGraphQLError(error);
  // yoga's own request errors ("POST body sent invalid JSON.") carry the parser's message in
  // extensions.originalError, and it quotes the whole body (a 60 KB body drew a 360 KB answer):
  // keep yoga's short fixed message, code and status (400 whatever the client accepts), without it.
  if (located?.extensions?.['originalError'] !== undefined) {
    const status = (located.extensions['http'] as { status?: number } | undefined)?.status ?? 400;
    return createGraphQLError(located.message, { extensions: { code: located.extensions['code'] ?? 'BAD_REQUEST', http: { status } } });
  }
  const original = located?.originalError ?? error;
  if (isDatabaseUnavailable(original)) {
    return codedError('SERVICE_UNAVAILABLE', 'the database is unavailable; try again shortly', {}, located);
  }
  const known = describeApiError(original);
  if (known) return codedError(known.code, known.message, known.extra, located);
  return yogaMaskError(error, fallbackMessage, false);
}

/**
 * Runs `fn`; an InvalidInputError it throws reaches the client with the lists of known names
 * (every action this server runs) only when the caller holds the admin token not limited to
 * namespaces, or no tokens are set.
 */
export async function knownFor<T>(viewer: { role: Role; namespaces: readonly string[] | undefined }, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (!(err instanceof InvalidInputError) || !seesServerDetails(viewer)) throw err;
    const problems = problemsOf(err.problems);
    throw new ApiError('BAD_USER_INPUT', err.describe({ listKnown: true }), err.argument, { problems });
  }
}
