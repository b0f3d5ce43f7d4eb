// The actions one worker offers, and the one way to run one: validate the input against
// the action's schema first (so bad input fails the execution before any action code
// runs), then run under the action's time limit.
import { BatonError, zodIssues } from '../errors.ts';
import { builtinActions } from './builtin.ts';
import {
  InvalidActionInputError,
  isActionDefinition,
  type ActionContext,
  type ActionDefinition,
  type AnyActionDefinition,
} from './action.ts';
import { runSignal } from './abort.ts';
import { RetryBackoff, type ActionPolicy } from '../../schemas/worker-events.ts';
import { offeredNames } from '../input/action-versions.ts';
import { printable } from '../input/rules.ts';

export interface ActionRegistry {
  /** The action called `name`, or undefined when this registry does not offer it. */
  get(name: string): AnyActionDefinition | undefined;
  has(name: string): boolean;
  /** Every action name, sorted: what WorkerStarted.actions and the liveness row advertise. */
  names(): string[];
  /** What the liveness row lists: every name, and `name@version` for each action that declares a version. */
  offers(): string[];
  /** Every runtime tag the actions need, sorted and unique. */
  runtimes(): string[];
  /** Each action's runtime, retry policy, timeouts and concurrency limit: what WorkerStarted advertises. */
  policies(): Record<string, ActionPolicy>;
}

/** Two actions with one name: which one runs would be an accident of load order. */
export class DuplicateActionError extends BatonError {
  constructor(readonly action: string) {
    super(
      `action "${action}" is defined more than once; action names must be unique within a worker` +
        // Most often the second definition is the user's own, of a name a built-in already has.
        (builtinActions.some((b) => b.name === action) ? ` (it is the name of one of Baton's built-in actions: name yours differently, or leave the built-ins out, builtins: false)` : ''),
    );
  }
}

/** Thrown by createActionRegistry for an entry that did not come from defineAction(). */
export class NotAnActionError extends BatonError {}

export function createActionRegistry(actions: readonly AnyActionDefinition[]): ActionRegistry {
  const byName = new Map<string, AnyActionDefinition>();
  actions.forEach((action, i) => {
    if (!isActionDefinition(action)) {
      throw new NotAnActionError(`actions[${i}] is not an action: build it with defineAction({ name, input, run })`);
    }
    if (byName.has(action.name)) throw new DuplicateActionError(action.name);
    byName.set(action.name, action);
  });
  const names = [...byName.keys()].sort();
  const runtimes = [...new Set([...byName.values()].map((a) => a.runtime))].sort();
  return {
    get: (name) => byName.get(name),
    has: (name) => byName.has(name),
    names: () => [...names],
    offers: () => names.flatMap((n) => offeredNames(n, byName.get(n)!.version)),
    runtimes: () => [...runtimes],
    policies: () => {
      const out: Record<string, ActionPolicy> = {};
      for (const a of byName.values()) {
        out[a.name] = {
          // The executor labels the action's work messages with it.
          runtime: a.runtime,
          // The version it runs, when it declares one (README: Versioned actions).
          ...(a.version !== undefined && { version: a.version }),
          // The backoff only: nonRetryable is the worker's own business (it decides retryable).
          ...(a.retry && { retry: RetryBackoff.parse(a.retry) }),
          ...(a.scheduleToStartTimeoutMs !== undefined && { scheduleToStartTimeoutMs: a.scheduleToStartTimeoutMs }),
          ...(a.timeoutMs !== undefined && { timeoutMs: a.timeoutMs }),
          ...(a.concurrency && { concurrency: { ...a.concurrency } }),
          ...(a.rateLimit && { rateLimit: { ...a.rateLimit } }),
        };
      }
      return out;
    },
  };
}

/**
 * The input as the action's schema parses it (defaults applied, unknown keys stripped when
 * the schema strips them). Throws InvalidActionInputError naming each bad field
 * (`input.ms: Too small: expected number to be >=0`), also when a refinement or transform of
 * the schema throws (`input: transform blew up (thrown by …)`). Input schemas must be
 * synchronous: an async refinement or transform is refused here, saying so.
 */
export function validateInput<I>(action: ActionDefinition<I, unknown>, input: unknown): I {
  let r: ReturnType<typeof action.input.safeParse>;
  // safeParse reports mismatches; only user code inside the schema (or async parts) throws.
  try {
    r = action.input.safeParse(input);
  } catch (err) {
    throw new InvalidActionInputError(action.name, [{ path: '', message: schemaThrew(err) }]);
  }
  if (!r.success) throw new InvalidActionInputError(action.name, zodIssues(r.error, action.input));
  return r.data;
}

/** What a throw out of safeParse means to the submitter (a workflow's step inputs are checked so too). */
export function schemaThrew(err: unknown): string {
  const e = err as { name?: unknown; message?: unknown } | null;
  // zod 4 throws $ZodAsyncError; zod 3 a plain Error. Both say "Use .parseAsync".
  if (e?.name === '$ZodAsyncError' || (typeof e?.message === 'string' && e.message.includes('parseAsync'))) {
    return "cannot be checked: the action's input schema is asynchronous (an async refine or transform), and Baton checks inputs synchronously; make its refinements and transforms synchronous";
  }
  let what: string;
  if (err instanceof Error) what = err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message;
  else if (typeof err === 'string') what = err;
  else {
    try {
      what = `non-error thrown: ${JSON.stringify(err) ?? String(err)}`;
    } catch {
      what = `non-error thrown: ${String(err)}`;
    }
  }
  return `${printable(what, 500)} (thrown by a refinement or transform of the action's input schema)`;
}

/** One attempt ran longer than the action's timeoutMs: the execution ends TimedOut (start-to-close), not retried whatever its retry policy says. */
export class ActionTimeoutError extends BatonError {
  constructor(
    readonly action: string,
    readonly timeoutMs: number,
  ) {
    super(`action ${action} timed out after ${timeoutMs} ms (its timeoutMs)`);
  }
}

/**
 * The caller's signal aborted the run (cancelled, ownership lost, shutdown); `cause` is the
 * signal's reason. The caller knows why, so it decides what to append, if anything.
 */
export class ActionAbortedError extends BatonError {
  constructor(
    readonly action: string,
    options?: ErrorOptions,
    /** The action's own run, which settles when its code returns: later than this error when it ignores its signal. */
    readonly running: Promise<unknown> = Promise.resolve(),
  ) {
    const why = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`action ${action} was aborted${why}`, options);
  }
}

/**
 * Validates `input`, then runs the action with `ctx.signal` replaced by one that also aborts
 * when `action.timeoutMs` passes. Settles as soon as either happens: with
 * ActionTimeoutError, or with ActionAbortedError when the caller's signal aborted; an
 * action that ignores its signal may still be running then, and whatever it settles with
 * later is dropped. Leaves no timer or listener behind.
 */
export async function runAction<I, O>(action: ActionDefinition<I, O>, input: unknown, ctx: ActionContext): Promise<O> {
  const parsed = validateInput(action, input);
  if (ctx.signal.aborted) throw new ActionAbortedError(action.name, { cause: ctx.signal.reason });
  const run = runSignal(ctx.signal, action.timeoutMs, () => new ActionTimeoutError(action.name, action.timeoutMs ?? 0));
  const { signal } = run;
  let onAbort!: () => void;
  let running: Promise<O> | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(run.timedOut() ? signal.reason : new ActionAbortedError(action.name, { cause: ctx.signal.reason }, running));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    running = action.run(parsed, { ...ctx, signal });
    // A run that settles after we stopped waiting for it must not become an unhandled rejection.
    running.catch(() => undefined);
    return await Promise.race([running, stopped]);
  } finally {
    signal.removeEventListener('abort', onAbort);
    run.dispose();
  }
}
