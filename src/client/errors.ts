// The client's own typed errors, and the way back from a GraphQL error to the typed error the
// server's resolver threw (src/api/errors.ts maps them the other way), so a caller catches the
// same classes whether the client reaches Baton through the database or the API.
import { InvalidActionInputError } from '../actions/action.ts';
import { BatonError, IdempotencyKeyConflictError, InvalidEventError, NotFoundError } from '../errors.ts';
import { InvalidInputError, type InputProblem } from '../input/errors.ts';
import type { ExecutionErrorInfo, ExecutionStatus } from './types.ts';

/** `client.result()`: the execution ended, but not as Completed. */
export class ExecutionFailedError extends BatonError {
  constructor(
    readonly executionId: string,
    /** Failed, Cancelled, TimedOut or Abandoned. */
    readonly status: ExecutionStatus,
    /** The last failure an attempt reported (absent for a cancel before any run). */
    readonly error: ExecutionErrorInfo | undefined,
    /** Why, when the history says: a cancel's reason, the timeout that fired, why it was abandoned. */
    readonly reason?: string,
  ) {
    // Why it ended first (a cancel's reason is not the last attempt's error); then that error.
    const failure = error && `${error.type ? `${error.type}: ` : ''}${error.message}`;
    const why = reason ? `: ${reason}${failure ? ` (the last attempt's error: ${failure})` : ''}` : failure ? `: ${failure}` : '';
    super(`execution ${executionId} ended as ${status}${why}`);
  }
}

/** `client.result(id, { timeout })`: the timeout passed before the execution finished (it goes on). */
export class ResultTimeoutError extends BatonError {
  constructor(
    readonly executionId: string,
    readonly timeoutMs: number,
    /** Its status when the wait gave up. */
    readonly status: ExecutionStatus | undefined,
  ) {
    super(`execution ${executionId} did not finish within ${timeoutMs} ms${status ? ` (it is ${status})` : ''}`);
  }
}

/**
 * An API answer with no more specific class: UNAUTHENTICATED, FORBIDDEN, LIMIT_EXCEEDED,
 * SERVICE_UNAVAILABLE, an HTTP failure, an unreachable server, or a GraphQL error without a code.
 * In both modes also `CLOSED`: a call on a closed client, or a `result` or `updates` still waiting
 * when it closed.
 */
export class BatonApiError extends BatonError {
  constructor(
    /** The error's `extensions.code` (`UNAUTHENTICATED`, …), or `HTTP_<status>`, `NETWORK`, or `CLOSED` (the client was closed). */
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** One error of a GraphQL response. */
export interface GraphQLErrorBody {
  message: string;
  extensions?: Record<string, unknown>;
}

const problemsOf = (ext: Record<string, unknown>, fallback: InputProblem): InputProblem[] => {
  const list = ext['problems'] ?? ext['issues'];
  if (!Array.isArray(list) || list.length === 0) return [fallback];
  return list.map((p: { path?: unknown; message?: unknown }) => ({ path: String(p.path ?? ''), message: String(p.message ?? '') }));
};

/**
 * The typed error behind a GraphQL error: BAD_USER_INPUT becomes InvalidActionInputError (the
 * input does not fit the action's schema) or InvalidInputError (each problem with its path),
 * NOT_FOUND NotFoundError, IDEMPOTENCY_CONFLICT IdempotencyKeyConflictError; anything else is
 * BatonApiError with the code. The server's message is kept word for word, except for InvalidActionInputError's (see below).
 */
export function fromGraphQLError(e: GraphQLErrorBody, context: { executionId?: string; action?: string; idempotencyKey?: string } = {}): BatonError {
  const ext = e.extensions ?? {};
  const code = typeof ext['code'] === 'string' ? ext['code'] : 'GRAPHQL_ERROR';
  let err: BatonError;
  switch (code) {
    case 'BAD_USER_INPUT': {
      const argument = typeof ext['argument'] === 'string' ? ext['argument'] : '';
      if (argument === 'input' && Array.isArray(ext['issues']) && context.action !== undefined) {
        // The issues' paths already start at `input`; the constructor adds that prefix again.
        const issues = problemsOf(ext, { path: 'input', message: e.message }).map((i) => ({ path: i.path.replace(/^input\.?/, ''), message: i.message }));
        err = new InvalidActionInputError(context.action, issues);
      } else if (Array.isArray(ext['issues']) && !ext['problems']) {
        err = new InvalidEventError('request', problemsOf(ext, { path: argument, message: e.message }));
      } else {
        err = new InvalidInputError(problemsOf(ext, { path: argument, message: e.message.replace(new RegExp(`^${argument}: `), '') }));
      }
      break;
    }
    case 'NOT_FOUND':
      err = new NotFoundError('execution', context.executionId ?? '?');
      break;
    case 'IDEMPOTENCY_CONFLICT':
      err = new IdempotencyKeyConflictError(context.idempotencyKey ?? '', String(ext['executionId'] ?? ''), 'see message');
      break;
    default:
      return new BatonApiError(code, e.message);
  }
  // The server's words, except for a schema refusal, which reads as the database client's does
  // (`invalid input for action billing.charge: input.cents: …`; the API drops the prefix).
  if (!(err instanceof InvalidActionInputError)) err.message = e.message;
  return err;
}
