// `createClient`: Baton from your own code. The same calls over the database (this process uses
// Baton's runtime directly) or over the GraphQL API; the transport does the talking, this module
// adds what both share: the options checks, `result` (follow the updates to a final state) and
// the types that carry an action's input and result from its definition to the caller.
//
//   const baton = await createClient({ databaseUrl: process.env.DATABASE_URL! });
//   const { executionId } = await baton.submit(charge, { customerId: 'c1', cents: 500 });
//   const { chargedCents } = await baton.result(executionId, { timeout: 30_000 });
import { isActionDefinition, type AnyActionDefinition } from '../actions/action.ts';
import { builtinActions } from '../actions/builtin.ts';
import { setTimeout as delay } from 'node:timers/promises';
import { MAX_TIMER_MS } from '../async/sleep.ts';
import { createActionRegistry } from '../actions/registry.ts';
import { token as tokenRule } from '../config-values.ts';
import { InvalidInputError, refuseAny, type InputProblem } from '../input/errors.ts';
import { unknownNameMessage } from '../input/nearest.ts';
import { openDatabaseTransport, type Transport } from './database-client.ts';
import { BatonApiError, ExecutionFailedError, ResultTimeoutError } from './errors.ts';
import { DatabaseUnavailableError } from '../db/database-unavailable.ts';
import { openGraphQLTransport } from './graphql-client.ts';
import type { BatonClient, ClientOptions, DatabaseClientOptions, ExecutionStatus, ExecutionView, GraphQLClientOptions, SubmitItem, SubmitOptions } from './types.ts';
import { UUID } from '../ids.ts';
import { textProblem } from '../input/rules.ts';

export * from './types.ts';
export { BatonApiError, ExecutionFailedError, ResultTimeoutError } from './errors.ts';
export { SubmitManyError, type SubmitManyResult } from './submit-many.ts';

const OPTION_KEYS = ['idempotencyKey', 'priority', 'maxAttempts', 'actionVersion', 'tags', 'namespace'] as const;
const ITEM_KEYS = ['action', 'input', ...OPTION_KEYS] as const;
// Execution ids are UUIDs (time-ordered, or derived from an idempotency key), as the API's uuidArg requires.
/** The id, lower-cased; anything but a UUID is refused the same way over the database and GraphQL. */
function checkId(id: unknown): string {
  if (typeof id !== 'string' || !UUID.test(id)) throw new InvalidInputError([{ path: 'id', message: 'must be an execution id (a UUID)' }]);
  return id.toLowerCase();
}

/** `baton cancel --reason` and the API's `cancelExecution(reason:)` take at most this many characters. */
const MAX_REASON_LENGTH = 1_000;

/**
 * A cancel's reason, by the rule the CLI and the API check it with (storable text, not empty,
 * at most 1,000 characters), so both modes refuse it alike before anything is recorded. Left
 * out (or null, as a GraphQL variable): the default reason.
 */
function checkReason(reason: unknown): string | undefined {
  if (reason === undefined || reason === null) return undefined;
  const problem = textProblem(reason, { required: true, maxLength: MAX_REASON_LENGTH });
  if (problem) throw new InvalidInputError([{ path: 'reason', message: problem }]);
  return reason as string;
}

/** Each key of `o` not in `known`, named under `at` with the nearest known one (`did you mean "input"?`); symbol keys too. */
function unknownKeys(o: object, known: readonly string[], at: string): InputProblem[] {
  const keys = Object.keys(o).filter((k) => !known.includes(k));
  return [
    ...keys.map((k) => ({ path: `${at}.${k}`, message: unknownNameMessage('option', k, known) })),
    ...Object.getOwnPropertySymbols(o).map((k) => ({ path: at, message: `a symbol key (${String(k)}) is no option; known: ${known.join(', ')}` })),
  ];
}

/** An options object (absent: none), its unknown keys refused, not ignored. */
function checkOptions<T extends object>(options: unknown, at: string, known: readonly string[], required = false): Partial<T> {
  if (options === undefined && !required) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidInputError([{ path: at, message: 'must be an object' }]);
  refuseAny(unknownKeys(options, known, at));
  return options as Partial<T>;
}

/** result()'s options: `timeout`, a whole number of ms a timer can hold. */
function checkResultOptions(o: unknown): { timeout?: number } {
  const { timeout } = checkOptions<{ timeout: number }>(o, 'options', ['timeout']);
  if (timeout !== undefined && !(typeof timeout === 'number' && Number.isFinite(timeout) && timeout > 0 && timeout <= MAX_TIMER_MS)) {
    throw new InvalidInputError([{ path: 'timeout', message: `must be a positive number of ms, at most ${MAX_TIMER_MS} (~24.8 days)` }]);
  }
  return timeout === undefined ? {} : { timeout };
}

/** updates()'s options: `signal`, an AbortSignal. */
function checkUpdatesOptions(o: unknown): { signal?: AbortSignal } {
  const { signal } = checkOptions<{ signal: AbortSignal }>(o, 'options', ['signal']);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidInputError([{ path: 'options.signal', message: 'must be an AbortSignal' }]);
  return signal === undefined ? {} : { signal };
}

/** createClient's options, each of the wrong type named, before anything is opened. */
function checkClientOptions(o: Record<string, unknown>, byDatabase: boolean): void {
  const allowed = byDatabase ? ['databaseUrl', 'actions', 'logger'] : ['graphqlUrl', 'token', 'actions'];
  refuseAny(unknownKeys(o, allowed, 'options'));
  const logger = o['logger'];
  if (logger !== undefined && (typeof logger !== 'object' || logger === null || typeof (logger as { child?: unknown }).child !== 'function')) {
    refuseAny([{ path: 'options.logger', message: 'must be a pino logger' }]);
  }
  const actions = o['actions'];
  if (actions !== undefined && !Array.isArray(actions)) refuseAny([{ path: 'options.actions', message: 'must be an array of actions built with defineAction' }]);
  refuseAny(((actions ?? []) as unknown[]).flatMap((a, i) => (isActionDefinition(a) ? [] : [{ path: `options.actions[${i}]`, message: 'not an action: build it with defineAction({ name, input, run })' }])));
  createActionRegistry((actions as AnyActionDefinition[] | undefined) ?? []); // DuplicateActionError: one name given twice
  // A definition of a built-in's name would be checked by the built-in's schema, not by its own: said, not dropped.
  refuseAny(
    ((actions ?? []) as AnyActionDefinition[]).flatMap((a, i) =>
      builtinActions.some((b) => b.name === a.name && b !== a)
        ? [{ path: `options.actions[${i}]`, message: `"${a.name}" is the name of one of Baton's built-in actions, whose own schema checks its submissions: name yours differently` }]
        : [],
    ),
  );
  const token = o['token'];
  // Empty is no token, as an empty BATON_API_TOKEN is unset.
  if (token !== undefined && token !== '') {
    const parsed = tokenRule.safeParse(token);
    if (!parsed.success) refuseAny([{ path: 'options.token', message: typeof token === 'string' ? parsed.error.issues[0]!.message : 'must be a string (a bearer token)' }]);
  }
}

/** result() beyond the API's subscriptions for one client asks this often: 250 ms, doubling up to 2 s. */
const ASK_FIRST_MS = 250;
const ASK_MAX_MS = 2_000;
const CLOSED = Symbol('closed');
const ABORTED = Symbol('aborted');
/** What any call on a closed client throws, in both modes. */
const closedError = () => new BatonApiError('CLOSED', 'the client is closed (close() was called): create another with createClient');
/** What `result` and `updates` still waiting when the client closed reject with. */
const closedWhileWaiting = (id: string, status: ExecutionStatus | undefined) =>
  new BatonApiError('CLOSED', `the client was closed while waiting for execution ${id} to finish${status ? ` (it is ${status})` : ''}`);

/**
 * A client for one Baton installation: `{ databaseUrl }` talks to its database directly,
 * `{ graphqlUrl, token }` to its API. Close it when done (`await client.close()`); any call after
 * that, and a `result` or `updates` still waiting then, rejects with BatonApiError `CLOSED`.
 */
export async function createClient(options: ClientOptions): Promise<BatonClient> {
  const o = (options ?? {}) as unknown as Record<string, unknown>;
  for (const url of ['databaseUrl', 'graphqlUrl']) {
    if (o[url] !== undefined && typeof o[url] !== 'string') throw new InvalidInputError([{ path: url, message: `must be a string (${url === 'databaseUrl' ? 'postgres://…' : 'http://…/graphql'})` }]);
    // NUL and lone surrogates, refused everywhere else, would otherwise reach the driver as part of a name.
    const problem = typeof o[url] === 'string' ? textProblem(o[url]) : undefined;
    if (problem) throw new InvalidInputError([{ path: url, message: problem }]);
  }
  const byDatabase = typeof o['databaseUrl'] === 'string';
  const byApi = typeof o['graphqlUrl'] === 'string';
  if (byDatabase === byApi) {
    throw new InvalidInputError([{ path: 'options', message: 'give either databaseUrl (postgres://…) or graphqlUrl (http://…/graphql), not both and not neither' }]);
  }
  checkClientOptions(o, byDatabase);
  const transport: Transport = byDatabase ? await openDatabaseTransport(options as DatabaseClientOptions) : openGraphQLTransport(options as GraphQLClientOptions);
  let closing: Promise<void> | undefined;
  // close() settles every wait in progress (result, updates) at once: a transport's own call
  // in flight (a query queued on a pool that is ending) could take its connect timeout to fail.
  const waits = new Set<AbortController>();
  const onClose = new Set<() => void>();
  const open = () => {
    if (closing) throw closedError();
  };
  /**
   * `p`, or CLOSED once the client closes first, or ABORTED once `signal` aborts first (a timeout,
   * the caller's abort: a transport's call stalled on the network must not outlast them); then
   * `p`'s own failure is of no interest.
   */
  function unlessClosed<T>(p: Promise<T>, signal?: AbortSignal): Promise<T | typeof CLOSED | typeof ABORTED> {
    p.catch(() => undefined);
    if (closing) return Promise.resolve(CLOSED);
    if (signal?.aborted) return Promise.resolve(ABORTED);
    return new Promise((resolve, reject) => {
      const closed = () => resolve(CLOSED);
      const aborted = () => resolve(ABORTED);
      onClose.add(closed);
      signal?.addEventListener('abort', aborted, { once: true });
      void p.then(resolve, reject).finally(() => {
        onClose.delete(closed);
        signal?.removeEventListener('abort', aborted);
      });
    });
  }

  /** The execution's views until a final one, ending when `signal` aborts; CLOSED when the client closes first. */
  async function* follow(id: string, signal: AbortSignal | undefined, seen: (view: ExecutionView) => void = () => undefined): AsyncGenerator<ExecutionView> {
    if (signal?.aborted) return;
    const ac = new AbortController();
    const stop = () => ac.abort();
    signal?.addEventListener('abort', stop, { once: true });
    waits.add(ac);
    const it = transport.updates(id, ac.signal)[Symbol.asyncIterator]();
    let last: ExecutionView | undefined;
    let ended = false;
    let abandoned = false;
    try {
      for (;;) {
        const step = await unlessClosed(it.next(), ac.signal);
        if (step === CLOSED) break;
        if (step === ABORTED) {
          abandoned = true; // its next() may be stuck: its cleanup is not awaited
          if (closing && !signal?.aborted) break;
          return;
        }
        if (step.done) {
          ended = true;
          if (closing && !signal?.aborted) break; // ended by the close, not by the caller
          if (signal?.aborted) return;
          // Never ended as if done while the execution goes on: the transport could not follow it.
          throw new BatonApiError('NETWORK', `the updates of execution ${id} ended before it finished${last ? ` (it is ${last.status})` : ''}`);
        }
        last = step.value;
        seen(last);
        yield last;
        if (last.final) return;
      }
    } catch (err) {
      if (!closing) throw err; // once closed, a failure of the transport's is the close's doing
    } finally {
      waits.delete(ac);
      signal?.removeEventListener('abort', stop);
      ac.abort();
      // The transport's own cleanup; not awaited once closed (its call in flight may be slow to fail).
      const cleanup = ended ? undefined : it.return?.();
      if (closing || abandoned) cleanup?.catch(() => undefined);
      else await cleanup;
    }
    if (!signal?.aborted) throw closedWhileWaiting(id, last?.status);
  }

  /**
   * The execution asked for every ASK_FIRST_MS, doubling up to ASK_MAX_MS, until it is final;
   * undefined once `signal` aborts or the client closes. An API or database out of reach is
   * asked again, as following would.
   */
  async function askUntilFinal(id: string, signal: AbortSignal, seen: (view: ExecutionView) => void): Promise<ExecutionView | undefined> {
    for (let waitMs = ASK_FIRST_MS; ; waitMs = Math.min(waitMs * 2, ASK_MAX_MS)) {
      // A timer that keeps the process alive: the caller awaits this result.
      await delay(waitMs, undefined, { signal }).catch(() => undefined);
      if (signal.aborted || closing) return undefined;
      const now = await unlessClosed(transport.get(id), signal).catch((err: unknown) => {
        if ((err instanceof BatonApiError && err.code === 'NETWORK') || err instanceof DatabaseUnavailableError) return undefined;
        throw err;
      });
      if (now === CLOSED || now === ABORTED) return undefined;
      if (now) seen(now);
      if (now?.final) return now;
    }
  }

  async function result(id: string, o?: { timeout?: number }): Promise<unknown> {
    open();
    const { timeout } = checkResultOptions(o);
    const checked = checkId(id);
    const ac = new AbortController();
    let timedOut = false;
    const timer = timeout !== undefined ? setTimeout(() => ((timedOut = true), ac.abort()), timeout) : undefined;
    let status: ExecutionStatus | undefined;
    const outcome = (view: ExecutionView): unknown => {
      if (view.status === 'Completed') return view.result;
      throw new ExecutionFailedError(id, view.status, view.error, view.endReason);
    };
    try {
      // One that has ended is answered at once, also when it is only in the archive (the API's
      // execution query reads archives; its updates do not, and would wait for nothing).
      const now = await unlessClosed(transport.get(checked), ac.signal).catch((err: unknown): typeof CLOSED | undefined => {
        if (closing) return CLOSED;
        // An API (or database) out of reach for now (a restart, an outage): following tries it
        // again within the timeout, and yields the current state first.
        if ((err instanceof BatonApiError && err.code === 'NETWORK') || err instanceof DatabaseUnavailableError) return undefined;
        throw err;
      });
      if (now === CLOSED) throw closedWhileWaiting(id, undefined);
      if (now === ABORTED) throw new ResultTimeoutError(id, timeout!, undefined);
      if (now?.final) return outcome(now);
      try {
        for await (const view of follow(checked, ac.signal, (v) => (status = v.status))) {
          if (view.final) return outcome(view);
        }
      } catch (err) {
        // The API has no subscription left for this client (BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT,
        // 50): a service awaiting more results than that at once asks for each instead.
        if (!(err instanceof BatonApiError && err.code === 'LIMIT_EXCEEDED')) throw err;
        const view = await askUntilFinal(checked, ac.signal, (v) => (status = v.status));
        if (view) return outcome(view);
      }
    } finally {
      clearTimeout(timer);
      ac.abort();
    }
    if (timedOut) throw new ResultTimeoutError(id, timeout!, status);
    throw new BatonApiError('NETWORK', `the updates of execution ${id} ended before it finished${status ? ` (it is ${status})` : ''}`);
  }

  const client: BatonClient = {
    mode: byDatabase ? 'database' : 'graphql',
    submit: (async (action: Parameters<Transport['submit']>[0], input?: unknown, options?: SubmitOptions) => {
      open();
      return transport.submit(action, input, checkOptions<SubmitOptions>(options, 'options', OPTION_KEYS));
    }) as BatonClient['submit'],
    async submitMany(items: readonly SubmitItem[]) {
      open();
      if (!Array.isArray(items)) throw new InvalidInputError([{ path: 'items', message: 'must be an array' }]);
      // Array.from visits a sparse array's holes too: each is refused as the item that is no object.
      const checked = Array.from(items, (item, i) => {
        const options = checkOptions<SubmitItem>(item, `items[${i}]`, ITEM_KEYS, true);
        return { ...options, action: item.action, input: item.input } as SubmitItem;
      });
      return transport.submitMany(checked);
    },
    result: result as BatonClient['result'],
    cancel: async (id, reason) => {
      open();
      return transport.cancel(checkId(id), checkReason(reason));
    },
    get: (async (id: string) => {
      open();
      return transport.get(checkId(id));
    }) as BatonClient['get'],
    history: async (id) => {
      open();
      return transport.history(checkId(id));
    },
    updates: ((id: string, o?: { signal?: AbortSignal }) => {
      open();
      return follow(checkId(id), checkUpdatesOptions(o).signal);
    }) as BatonClient['updates'],
    close: () =>
      (closing ??= (async () => {
        for (const closed of onClose) closed();
        for (const wait of waits) wait.abort();
        await transport.close();
      })()),
  };
  return client;
}
