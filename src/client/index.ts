// `createClient`: Baton from your own code. The same calls over the database (this process uses
// Baton's runtime directly) or over the GraphQL API; the transport does the talking, this module
// adds what both share: the options checks, `result` (follow the updates to a final state) and
// the types that carry an action's input and result from its definition to the caller.
//
//   const baton = await createClient({ databaseUrl: process.env.DATABASE_URL! });
//   const { executionId } = await baton.submit(charge, { customerId: 'c1', cents: 500 });
//   const { chargedCents } = await baton.result(executionId, { timeout: 30_000 });
import { InvalidInputError } from '../input/errors.ts';
import { openDatabaseTransport, type Transport } from './database-client.ts';
import { BatonApiError, ExecutionFailedError, ResultTimeoutError } from './errors.ts';
import { openGraphQLTransport } from './graphql-client.ts';
import type { BatonClient, ClientOptions, ExecutionStatus, ExecutionView, SubmitItem, SubmitOptions } from './types.ts';
import { UUID } from '../ids.ts';
import { textProblem } from '../input/rules.ts';

export * from './types.ts';
export { BatonApiError, ExecutionFailedError, ResultTimeoutError } from './errors.ts';
export { SubmitManyError, type SubmitManyResult } from './submit-many.ts';

const OPTION_KEYS = ['idempotencyKey', 'priority', 'maxAttempts', 'actionVersion', 'tags', 'namespace'] as const;
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

/** Unknown submit options are refused, not ignored. (Tags and namespaces are checked where the submission is: src/runtime/submission.ts.) */
function checkOptions(options: unknown, at: string): SubmitOptions {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidInputError([{ path: at, message: 'must be an object' }]);
  const problems = Object.keys(options)
    .filter((k) => !(OPTION_KEYS as readonly string[]).includes(k) && !(at.startsWith('items[') && (k === 'action' || k === 'input')))
    .map((k) => ({ path: `${at}.${k}`, message: `unknown option; known: ${OPTION_KEYS.join(', ')}` }));
  if (problems.length > 0) throw new InvalidInputError(problems);
  return options as SubmitOptions;
}

/**
 * A client for one Baton installation: `{ databaseUrl }` talks to its database directly,
 * `{ graphqlUrl, token }` to its API. Close it when done (`await client.close()`).
 */
export async function createClient(options: ClientOptions): Promise<BatonClient> {
  const o = (options ?? {}) as unknown as Record<string, unknown>;
  const byDatabase = typeof o['databaseUrl'] === 'string';
  const byApi = typeof o['graphqlUrl'] === 'string';
  if (byDatabase === byApi) {
    throw new InvalidInputError([{ path: 'options', message: 'give either databaseUrl (postgres://…) or graphqlUrl (http://…/graphql), not both and not neither' }]);
  }
  const allowed = byDatabase ? ['databaseUrl', 'actions'] : ['graphqlUrl', 'token'];
  const unknown = Object.keys(o).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) throw new InvalidInputError(unknown.map((k) => ({ path: `options.${k}`, message: `unknown option; known: ${allowed.join(', ')}` })));
  const transport: Transport = byDatabase ? await openDatabaseTransport(options as { databaseUrl: string }) : openGraphQLTransport(options as { graphqlUrl: string });

  async function result(id: string, o: { timeout?: number } = {}): Promise<unknown> {
    const timeout = o.timeout;
    if (timeout !== undefined && !(Number.isFinite(timeout) && timeout > 0)) throw new InvalidInputError([{ path: 'timeout', message: 'must be a positive number of ms' }]);
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
      const now = await transport.get(checkId(id));
      if (now?.final) return outcome(now);
      for await (const view of transport.updates(checkId(id), ac.signal)) {
        status = view.status;
        if (view.final) return outcome(view);
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
    submit: (async (action: Parameters<Transport['submit']>[0], input?: unknown, options?: SubmitOptions) =>
      transport.submit(action, input, checkOptions(options, 'options'))) as BatonClient['submit'],
    async submitMany(items: readonly SubmitItem[]) {
      if (!Array.isArray(items)) throw new InvalidInputError([{ path: 'items', message: 'must be an array' }]);
      const checked = items.map((item, i) => {
        const options = checkOptions(item, `items[${i}]`); // an item that is no object is refused here
        return { action: item.action, input: item.input, ...options };
      });
      return transport.submitMany(checked);
    },
    result: result as BatonClient['result'],
    cancel: async (id, reason) => transport.cancel(checkId(id), checkReason(reason)),
    get: (async (id: string) => transport.get(checkId(id))) as BatonClient['get'],
    history: async (id) => transport.history(checkId(id)),
    updates: ((id: string, o: { signal?: AbortSignal } = {}) => transport.updates(checkId(id), o.signal)) as BatonClient['updates'],
    close: () => transport.close(),
  };
  return client;
}
