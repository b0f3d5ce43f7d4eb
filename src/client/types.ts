// The typed client's public types: what `createClient` takes and what its calls return, the
// same whether the client talks to the database or to the GraphQL API. Breaking changes to
// anything here are listed in CHANGELOG.md.
import type { z } from 'zod';
import type { Logger } from 'pino';
import type { AnyActionDefinition } from '../actions/action.ts';

/** Where an execution is in its lifecycle (the execution machine's states). */
export type ExecutionStatus = 'Requested' | 'Scheduling' | 'Scheduled' | 'Running' | 'Completed' | 'Failed' | 'Cancelled' | 'TimedOut' | 'Abandoned';

/**
 * Items per `submitExecutions` request of the GraphQL client's `submitMany` (the API's
 * BATON_API_MAX_SUBMIT_BATCH is 1,000 by default; against a server set lower, the client learns
 * its limit from the refusal and sends batches that size).
 */
export const SUBMIT_BATCH = 500;

/** The states an execution never leaves. */
export const FINAL_STATUSES: ReadonlySet<ExecutionStatus> = new Set(['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned']);

declare const OUTPUT: unique symbol;
/**
 * An execution id. Returned by `submit` with the action's result type attached (type-level
 * only: at run time it is the plain string), so `client.result(id)` resolves with that type.
 * Any string id is accepted where an ExecutionId is expected; its result is then `unknown`.
 */
export type ExecutionId<O = unknown> = string & { readonly [OUTPUT]?: O };

/** How an attempt failed, as recorded in the history. */
export interface ExecutionErrorInfo {
  message: string;
  /** `ActionError.type`, else the thrown error's name (`TypeError`, `TimedOut`, …). */
  type?: string;
}

/** One execution as it is now. Over the database it is folded from its event stream; over GraphQL it is the read model's row (which may lag a moment behind). */
export interface ExecutionView<O = unknown> {
  id: ExecutionId<O>;
  action: string;
  status: ExecutionStatus;
  /** Revision of the last event: it grows by one with every change. */
  revision: number;
  input: unknown;
  /** The action's return value, once Completed; otherwise undefined. */
  result: O | undefined;
  /** The last failure an attempt reported, if any. */
  error: ExecutionErrorInfo | undefined;
  /** 1-based; grows with each retry. */
  attempt: number;
  maxAttempts: number;
  /** `executor` or `worker:<id>`: who may move it on. */
  owner: string;
  /** The worker holding (or that last held) it. */
  workerId: string | undefined;
  priority: number | undefined;
  /** The action version its latest attempt was handed off to run; before any handoff, its pin; undefined when neither. */
  actionVersion: number | undefined;
  idempotencyKey: string | undefined;
  /** The namespace it lives in (`default` when submitted without one). */
  namespace: string;
  /** Its tags: the submitter's merged with those the running action added (`ctx.tag`); `{}` when none. */
  tags: Record<string, string>;
  /** ISO 8601. */
  requestedAt: string;
  /** ISO 8601, once in a final state. */
  finishedAt: string | undefined;
  /** Why it ended, when it was Cancelled, TimedOut or Abandoned: the cancel's reason, the limit that fired (`start-to-close limit`), or why it was abandoned. */
  endReason: string | undefined;
  /** Whether `status` is final (Completed, Failed, Cancelled, TimedOut, Abandoned). */
  final: boolean;
}

/** One event of an execution's history and the state it led to. */
export interface HistoryEntry {
  revision: number;
  /** The event's type: `ExecutionRequested`, `ExecutionStarted`, … */
  type: string;
  /** Who appended it: `executor` or `worker:<id>`. */
  by: string;
  /** ISO 8601. */
  recordedAt: string;
  data: unknown;
  /** The state before the event (undefined for revision 0) and after it. */
  stateBefore: ExecutionStatus | undefined;
  state: ExecutionStatus;
}

/** Options of one submission. */
export interface SubmitOptions {
  /** Submitting the same request with the same key again returns the first execution (`created: false`); the same key with a different request is refused (IdempotencyKeyConflictError). At most 500 characters. */
  idempotencyKey?: string;
  /** Among executions waiting for a worker, higher goes first (default 0; a 32-bit integer). */
  priority?: number;
  /** Attempts in total, 1 to 1000 (default: the action's retry.maxAttempts, else BATON_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Run every attempt on this version of the action (a whole number from 1); default: the newest a live worker offers at each handoff. */
  actionVersion?: number;
  /**
   * Your own string key-values to find executions by (`baton list --tag k=v`, GraphQL
   * `executions(filter: {tags})`): at most 32, keys of 1 to 64 letters, digits and `_ . : / -`,
   * values of 1 to 256 characters; a bad one is InvalidInputError naming it.
   */
  tags?: Record<string, string>;
  /**
   * The namespace it lives in (default `default`; 1 to 63 lower-case letters, digits or `-`),
   * created on first use. An idempotency key is unique within its namespace.
   */
  namespace?: string;
}

/** What `submit` returns. */
export interface Submitted<O = unknown> {
  executionId: ExecutionId<O>;
  /** False when the idempotency key found an identical earlier submission. */
  created: boolean;
  /** Its status as the event store has it right after the submission. */
  status: ExecutionStatus;
}

/**
 * One item of `submitMany`: a definition or an action name. Its input is not typed here (a list
 * mixes actions), but checked against the action's schema before anything is stored, as
 * `submit`'s is; for a typed input and result, submit it with `submit`.
 */
export type SubmitItem = { action: AnyActionDefinition | string; input?: unknown } & SubmitOptions;

/** What `cancel` did. */
export interface CancelOutcome {
  executionId: string;
  /**
   * `cancelled`: it is Cancelled now (no worker held it). `cancel-requested`: a worker holds it
   * and was asked to stop; it ends as Cancelled unless it finishes first. `already-requested`: an
   * earlier request is still being carried out. `too-late`: it had already finished.
   */
  outcome: 'cancelled' | 'cancel-requested' | 'already-requested' | 'too-late';
  /** Its state right after the call. */
  status: ExecutionStatus;
  /** What happened and what happens next, in a sentence. */
  message: string;
}

/** The input an action definition's schema accepts (before its defaults and transforms). */
export type InputOf<A> = A extends { readonly input: z.ZodType<any, infer In> } ? In : unknown;
/** What an action definition's `run` resolves with. */
export type OutputOf<A> = A extends { run(...args: any[]): Promise<infer O> } ? O : unknown;

/** Talk to Baton through its database (this process appends to the event store itself). */
export interface DatabaseClientOptions {
  /** `postgres://user:password@host:5432/database`: the database Baton's hosts use. */
  databaseUrl: string;
  /**
   * Action definitions a submission by name may use, besides the built-ins (`core.*`,
   * `http.request`). A submission that passes the definition itself needs none. Must be an
   * array of `defineAction` results (InvalidInputError naming `options.actions` otherwise).
   */
  actions?: readonly AnyActionDefinition[];
  /** Where it logs (a lost database connection, a retried follow). Default: JSON on stderr at BATON_LOG_LEVEL, else warn. */
  logger?: Logger;
  /** Not with `databaseUrl`: one client talks one way. */
  graphqlUrl?: never;
  token?: never;
}

/** Talk to Baton through its GraphQL API (`baton api` or `baton dev`). */
export interface GraphQLClientOptions {
  /** The API's endpoint, e.g. `http://127.0.0.1:4000/graphql`. */
  graphqlUrl: string;
  /** A bearer token (BATON_API_TOKEN to submit and cancel; BATON_API_READ_TOKEN reads only): printable ASCII without spaces, empty meaning none. Not needed against a loopback API started without tokens. */
  token?: string;
  /**
   * Action definitions whose schemas the client checks a submission by name against before
   * sending it, as the built-ins' (`core.*`, `http.request`) and any definition passed are.
   * Other names are checked by the server alone (see `submitMany`).
   */
  actions?: readonly AnyActionDefinition[];
  /** Not with `graphqlUrl`: one client talks one way. */
  databaseUrl?: never;
}

export type ClientOptions = DatabaseClientOptions | GraphQLClientOptions;

/**
 * Submit executions, wait for their results, follow and cancel them. Every failure is one of
 * Baton's typed errors (`InvalidInputError`, `InvalidActionInputError`, `NotFoundError`,
 * `IdempotencyKeyConflictError`, `ExecutionFailedError`, `ResultTimeoutError`, `BatonApiError`),
 * whichever way the client is connected.
 */
export interface BatonClient {
  /** `database` or `graphql`: how this client reaches Baton. */
  readonly mode: 'database' | 'graphql';
  /**
   * Submit one execution. With the action's definition, `input` is typed from its zod schema
   * and the returned id carries the result type; with a name, both are `unknown`.
   */
  submit<A extends AnyActionDefinition>(action: A, input: InputOf<A>, options?: SubmitOptions): Promise<Submitted<OutputOf<A>>>;
  submit(action: string, input?: unknown, options?: SubmitOptions): Promise<Submitted>;
  /**
   * Submit several executions; results in the items' order. Every item is checked before any is
   * stored or sent, and a bad one refuses the call with nothing stored (InvalidInputError naming
   * `items[i].…`, InvalidActionInputError `items[i]: …`; an idempotency key used twice in the
   * call for different requests likewise). Over GraphQL the client checks an item's input against
   * its action's schema when it knows the schema: a definition passed as `action`, one of the
   * client's `actions`, or a built-in. An action named only by the server is checked by the server,
   * one `submitExecutions` request of {@link SUBMIT_BATCH} items at a time: when it refuses a batch
   * (nothing of that batch is stored), the earlier batches are stored, and the error is a
   * `SubmitManyError` whose `results` has every item's outcome (`ok: true` for each stored one).
   * An item the store does not take is left out alone: an idempotency key naming an earlier,
   * different request (IdempotencyKeyConflictError), or a store that refused or failed it. The
   * other items are stored; then the first such item's error is thrown (`items[i]: …`), carrying
   * every item's outcome in `results` (`SubmitManyError`), so exactly the others can be sent again.
   */
  submitMany(items: readonly SubmitItem[]): Promise<Submitted[]>;
  /**
   * The execution's result once it completes. Rejects with ExecutionFailedError when it ends
   * otherwise (Failed, Cancelled, TimedOut, Abandoned), with ResultTimeoutError when `timeout`
   * (ms) passes first, with NotFoundError at once for an id no execution has (over GraphQL too:
   * the event store is asked, not only the read model), and with BatonApiError `CLOSED` when the
   * client is closed while it waits.
   */
  result<O>(id: ExecutionId<O>, options?: { timeout?: number }): Promise<O>;
  /** Cancel it in whatever state it is; a finished one is left alone (`outcome: 'too-late'`). */
  cancel(id: string, reason?: string): Promise<CancelOutcome>;
  /** The execution as it is now, or undefined when there is none with this id (yet, over GraphQL). */
  get<O>(id: ExecutionId<O>): Promise<ExecutionView<O> | undefined>;
  /** Its events in order, each with the state it led to. NotFoundError for an unknown id. */
  history(id: string): Promise<HistoryEntry[]>;
  /**
   * Its state each time it changes: the current one first, then every change, ending after a
   * final state (or when `signal` aborts). `for await (const u of client.updates(id)) …`
   * NotFoundError for an unknown id; BatonApiError `CLOSED` when the client is closed meanwhile.
   */
  updates<O>(id: ExecutionId<O>, options?: { signal?: AbortSignal }): AsyncIterable<ExecutionView<O>>;
  /**
   * Closes the client's connections. A `result` or `updates` still waiting rejects with
   * BatonApiError `CLOSED`, as does any call made afterwards; calling close() again is harmless.
   */
  close(): Promise<void>;
}

/** Why an execution ended other than by its action's own outcome (ExecutionView.endReason). */
export const endReasonOf = (c: { cancelReason?: string | null; timedOutLimit?: string | null; abandonReason?: string | null }): string | undefined =>
  c.cancelReason ?? (c.timedOutLimit ? `${c.timedOutLimit} limit` : undefined) ?? c.abandonReason ?? undefined;
