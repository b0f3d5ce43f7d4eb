// Failing an action: ActionError (what an action throws to say what kind of failure it was and
// whether a retry could help), how any thrown value is described for the history (toErrorInfo,
// which never throws, whatever was thrown), and whether a failed attempt may be retried.
import { inspect } from 'node:util';
import type { ErrorInfo } from '../../schemas/events.ts';
import { BatonError, InvalidEventError } from '../errors.ts';
import { printable, storableText } from '../input/rules.ts';
import type { AnyActionDefinition } from './action.ts';

export interface ActionErrorOptions extends ErrorOptions {
  /** What kind of failure, for RetryPolicy.nonRetryable and for readers of the history. Default "ActionError". */
  type?: string;
  /** False: retrying cannot help (bad input, permission denied); the execution fails at once. Default true. */
  retryable?: boolean;
}

const ACTION_ERROR = Symbol.for('baton.action-error');

/**
 * Throw this from an action to say what kind of failure it was and whether a retry could
 * help: `throw new ActionError('card declined', { type: 'CardDeclined', retryable: false })`.
 * Any other thrown value is a retryable failure typed by its name (`TypeError`, …).
 */
export class ActionError extends BatonError {
  readonly type: string;
  readonly retryable: boolean;
  /** Marks it across copies of Baton in one process (see hasInstance). */
  readonly [ACTION_ERROR] = true as const;

  /**
   * `instanceof ActionError` holds for an ActionError from another copy of this module too: an
   * actions module run from its TypeScript source imports the package by name, which may be a
   * second copy of Baton beside the one running it (`baton` running its sources, say).
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (this !== ActionError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as { [ACTION_ERROR]?: unknown })[ACTION_ERROR] === true;
  }

  constructor(message: string, options: ActionErrorOptions = {}) {
    const { type, retryable, ...errorOptions } = options;
    super(message, errorOptions);
    this.type = type ?? 'ActionError';
    this.retryable = retryable ?? true;
  }
}

// History is forever; a runaway message or stack must not bloat every read of the stream.
const MAX_MESSAGE_CHARS = 4_096;
const MAX_STACK_CHARS = 16_384;
// Stored as text, so a NUL or a lone surrogate in a message (from input echoed back, say) is replaced, not refused.
const clip = (s: string, max: number) => storableText(s.length > max ? `${s.slice(0, max)}… (${s.length - max} more chars)` : s);

/**
 * What a thrown value is, read without trusting it: an `instanceof`, a getter or a toString of
 * an action's thrown value may itself throw (a Proxy, a getter that fails), and describing a
 * failure must never fail in turn, or the run would end with no outcome and its slot held.
 */
export function isA(value: unknown, kind: abstract new (...args: never[]) => unknown): boolean {
  try {
    return value instanceof kind;
  } catch {
    return false;
  }
}

/** Why reading a thrown value failed, in a few words; total, as everything here. */
function whyOf(why: unknown): string {
  try {
    if (why instanceof Error) return clip(`${String(why.name)}: ${String(why.message)}`, 500);
    return clip(typeof why === 'string' ? why : `${typeof why} ${String(why)} was thrown`, 500);
  } catch {
    return 'describing why threw as well';
  }
}

const undescribable = (why: string) => `a thrown value that could not be described (${why})`;

// Bounded, and shown as it is: a Proxy's traps and an object's getters are not run.
const INSPECT = { depth: 2, breakLength: Infinity, maxArrayLength: 20, maxStringLength: 1_000, showProxy: true, getters: false } as const;

/** A thrown non-Error as text: its JSON (so `{"code":7}`), else as Node shows it (a cycle, a BigInt, a throwing toJSON). */
function nonErrorText(err: unknown): string {
  if (typeof err === 'string') return err;
  try {
    const json = JSON.stringify(err);
    if (json !== undefined) return json;
  } catch {
    // Not JSON: shown below instead.
  }
  return typeof err === 'object' && err !== null ? inspect(err, INSPECT) : String(err);
}

/** The failure's type: ActionError.type, else the error's name, else "NonError" for a thrown non-Error. Never throws. */
export function errorType(err: unknown): string {
  try {
    if (isA(err, ActionError)) return clip(String((err as ActionError).type), 200);
    if (isA(err, Error)) return clip(String((err as Error).name) || 'Error', 200);
  } catch {
    // A type or name getter that throws: what it is, as far as can be told.
    return isA(err, Error) ? 'Error' : 'NonError';
  }
  return 'NonError';
}

/**
 * What ExecutionFailed records: `{ message, type, stack? }` (ErrorInfo in schemas/events.ts).
 * Never throws: a value whose getters, toJSON or toString throw is recorded as
 * `a thrown value that could not be described (why)`.
 */
export function toErrorInfo(err: unknown): ErrorInfo & { type: string } {
  const type = errorType(err);
  if (isA(err, Error)) {
    let message: string;
    try {
      message = String((err as Error).message);
    } catch (why) {
      message = undescribable(`reading its message threw ${whyOf(why)}`);
    }
    const info: ErrorInfo & { type: string } = { message: clip(message, MAX_MESSAGE_CHARS), type };
    try {
      // V8 builds the stack's first line from name and message: it throws when they do.
      const stack: unknown = (err as Error).stack;
      if (typeof stack === 'string' && stack !== '') info.stack = clip(stack, MAX_STACK_CHARS);
    } catch {
      // No stack, then.
    }
    return info;
  }
  let message: string;
  try {
    message = `non-error thrown: ${nonErrorText(err)}`;
  } catch (why) {
    message = undescribable(whyOf(why));
  }
  return { message: clip(message, MAX_MESSAGE_CHARS), type };
}

/**
 * The execution's input does not match the action's schema. Thrown by validateInput before
 * any action code runs; never retryable (the input is the same on every attempt). Paths
 * start at `input`: `invalid input for action core.sleep: input.ms: Too small: …`.
 */
export class InvalidActionInputError extends InvalidEventError {
  constructor(
    readonly action: string,
    issues: { path: string; message: string }[],
  ) {
    super(
      `input for action ${action}`,
      issues.map((i) => ({ path: i.path ? `input.${i.path}` : 'input', message: i.message })),
    );
  }
}

/**
 * Whether a failed attempt may be retried (attempts left is the machine's question, not
 * this one's). Non-retryable when the error says so (ActionError.retryable false), when
 * the action's retry.nonRetryable lists its type, or when the input was invalid; every
 * other failure is retryable.
 */
export function isRetryable(err: unknown, action: Pick<AnyActionDefinition, 'retry'>): boolean {
  // Never throws (see isA): a value that cannot be read is like any other thrown non-Error.
  try {
    if (isA(err, ActionError) && !(err as ActionError).retryable) return false;
  } catch {
    // A retryable getter that throws: not a no.
  }
  if (isA(err, InvalidActionInputError)) return false;
  return !(action.retry?.nonRetryable ?? []).includes(errorType(err));
}
