// The client over Baton's GraphQL API: queries and mutations are JSON POSTs (fetch), updates
// are the `executionUpdated` subscription over Server-Sent Events (graphql-yoga serves them;
// sse-updates.ts follows them across restarts). Every GraphQL error comes
// back as the typed error the server's resolver threw (errors.ts).
import { InvalidActionInputError, type AnyActionDefinition } from '../actions/action.ts';
import { builtinActions } from '../actions/builtin.ts';
import { BatonError } from '../errors.ts';
import { InvalidInputError } from '../input/errors.ts';
import type { Transport } from './database-client.ts';
import { BatonApiError, fromGraphQLError, type GraphQLErrorBody } from './errors.ts';
import { actionsFor, checkItems, checkOne, knownActions } from './checks.ts';
import { followExecution, retrying } from './sse-updates.ts';
import { submittedOrThrow, withResults, type SubmitManyResult } from './submit-many.ts';
import { endReasonOf, FINAL_STATUSES, SUBMIT_BATCH, type CancelOutcome, type ExecutionStatus, type ExecutionView, type GraphQLClientOptions, type SubmitItem, type SubmitOptions, type Submitted } from './types.ts';

const VIEW_FIELDS = `id action status revision input(whole: true) result(whole: true) error(whole: true) attempt maxAttempts owner workerId priority actionVersion idempotencyKey namespace tags requestedAt finishedAt cancelReason timedOutLimit abandonReason`;

interface ExecutionRowJson {
  id: string;
  action: string;
  status: ExecutionStatus;
  revision: number;
  input: unknown;
  result: unknown;
  error: { message?: unknown; type?: unknown } | null;
  attempt: number;
  maxAttempts: number;
  owner: string;
  workerId: string | null;
  priority: number | null;
  actionVersion: number | null;
  idempotencyKey: string | null;
  namespace: string;
  tags: Record<string, string> | null;
  requestedAt: string;
  finishedAt: string | null;
  cancelReason: string | null;
  timedOutLimit: string | null;
  abandonReason: string | null;
}

function viewOfRow(r: ExecutionRowJson): ExecutionView {
  return {
    id: r.id,
    action: r.action,
    status: r.status,
    revision: Number(r.revision),
    input: r.input,
    result: r.status === 'Completed' ? r.result : undefined,
    error: r.error ? { message: String(r.error.message ?? ''), ...(typeof r.error.type === 'string' && { type: r.error.type }) } : undefined,
    attempt: r.attempt,
    maxAttempts: r.maxAttempts,
    owner: r.owner,
    workerId: r.workerId ?? undefined,
    priority: r.priority ?? undefined,
    actionVersion: r.actionVersion ?? undefined,
    idempotencyKey: r.idempotencyKey ?? undefined,
    namespace: r.namespace,
    tags: r.tags ?? {},
    requestedAt: r.requestedAt,
    finishedAt: r.finishedAt ?? undefined,
    endReason: endReasonOf(r),
    final: FINAL_STATUSES.has(r.status),
  };
}

/** How long a query or mutation may take before it is BatonApiError NETWORK (a stalled network, a hung server). */
export const REQUEST_TIMEOUT_MS = 30_000;

const OUTCOMES: Record<string, CancelOutcome['outcome']> = { CANCELLED: 'cancelled', CANCEL_REQUESTED: 'cancel-requested', ALREADY_REQUESTED: 'already-requested', TOO_LATE: 'too-late' };

export function openGraphQLTransport(o: GraphQLClientOptions): Transport {
  let url: URL;
  try {
    url = new URL(o.graphqlUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
  } catch {
    throw new InvalidInputError([{ path: 'graphqlUrl', message: 'must be an http(s) URL like http://127.0.0.1:4000/graphql' }]);
  }
  const headers: Record<string, string> = o.token ? { authorization: `Bearer ${o.token}` } : {};
  // What the client checks before sending: the built-ins, the caller's `actions` and any
  // definition passed; an action only the server knows is checked there (checks.ts).
  const registryFor = actionsFor(knownActions(builtinActions, o.actions), 'server');
  const inFlight = new Set<AbortController>();
  // Items per submitExecutions request: SUBMIT_BATCH until the server says it takes fewer.
  let batchSize = SUBMIT_BATCH;

  /**
   * `answer`: turns a GraphQL error that is an answer (a cancel too late) into data; undefined throws it.
   * `signal`: the caller's, to stop waiting; every request gives up after REQUEST_TIMEOUT_MS anyway.
   */
  async function request<D>(query: string, variables: Record<string, unknown>, context: Parameters<typeof fromGraphQLError>[1] = {}, answer?: (e: GraphQLErrorBody) => D | undefined, signal?: AbortSignal): Promise<D> {
    // Not in the try below: a value JSON cannot carry is a bug of ours (the calls check first), not an unreachable server.
    const body = JSON.stringify({ query, variables });
    const ac = new AbortController();
    inFlight.add(ac);
    let timedOut = false;
    const timer = setTimeout(() => ((timedOut = true), ac.abort()), REQUEST_TIMEOUT_MS);
    const stop = () => ac.abort();
    signal?.addEventListener('abort', stop, { once: true });
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
        body,
        signal: ac.signal,
      });
      text = await res.text();
    } catch (err) {
      if (timedOut) throw new BatonApiError('NETWORK', `the Baton API at ${url.href} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`, { cause: err });
      throw new BatonApiError('NETWORK', `cannot reach the Baton API at ${url.href}: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', stop);
      inFlight.delete(ac);
    }
    let reply: { data?: D | null; errors?: GraphQLErrorBody[] };
    try {
      reply = JSON.parse(text);
    } catch {
      throw new BatonApiError(`HTTP_${res.status}`, `the Baton API answered ${res.status} without a GraphQL response: ${text.slice(0, 200)}`);
    }
    const first = reply.errors?.[0];
    const answered = first && answer?.(first);
    if (answered !== undefined) return answered;
    if (first) throw fromGraphQLError(first, context);
    if (!res.ok || reply.data == null) throw new BatonApiError(`HTTP_${res.status}`, `the Baton API answered ${res.status} with no data`);
    return reply.data;
  }

  function submitVariables(action: AnyActionDefinition | string, input: unknown, options: SubmitOptions) {
    return {
      action: typeof action === 'string' ? action : action.name,
      input: input === undefined ? null : input,
      ...(options.idempotencyKey !== undefined && { idempotencyKey: options.idempotencyKey }),
      ...(options.maxAttempts !== undefined && { maxAttempts: options.maxAttempts }),
      ...(options.priority !== undefined && { priority: options.priority }),
      ...(options.tags !== undefined && { tags: options.tags }),
      ...(options.actionVersion !== undefined && { actionVersion: options.actionVersion }),
      ...(options.namespace !== undefined && { namespace: options.namespace }),
    };
  }

  const SUBMIT = `mutation Submit($action: String!, $input: JSON, $idempotencyKey: String, $maxAttempts: Int, $priority: Int, $tags: JSON, $actionVersion: Int, $namespace: String) {
    submitExecution(action: $action, input: $input, idempotencyKey: $idempotencyKey, maxAttempts: $maxAttempts, priority: $priority, tags: $tags, actionVersion: $actionVersion, namespace: $namespace) { executionId created status }
  }`;

  async function submit(action: AnyActionDefinition | string, input: unknown, options: SubmitOptions) {
    checkOne(registryFor(action), action, input, options); // as over the database, before anything is sent
    const variables = submitVariables(action, input, options);
    try {
      const d = await request<{ submitExecution: { executionId: string; created: boolean; status: ExecutionStatus } }>(SUBMIT, variables, {
        action: variables.action,
        ...(options.idempotencyKey !== undefined && { idempotencyKey: options.idempotencyKey }),
      });
      return d.submitExecution;
    } catch (err) {
      throw tooLarge(err) ? inputTooLarge('input', input, url) : err;
    }
  }

  async function get(id: string): Promise<ExecutionView | undefined> {
    const d = await request<{ execution: ExecutionRowJson | null }>(`query Get($id: ID!) { execution(id: $id) { ${VIEW_FIELDS} } }`, { id }, { executionId: id });
    return d.execution ? viewOfRow(d.execution) : undefined;
  }

  return {
    submit,
    async submitMany(items) {
      checkItems(registryFor, items); // every item, as over the database, before the first batch is sent
      // One submitExecutions request (one appendMany on the server) per batch, in order.
      const results: SubmitManyResult[] = [];
      let size = batchSize;
      for (let start = 0; start < items.length; start += size) {
        const batch = items.slice(start, start + size);
        let d: { submitExecutions: { results: SubmitExecutionsItemJson[] } };
        try {
          d = await request(SUBMIT_MANY, { inputs: batch.map(({ action, input, ...options }) => submitVariables(action, input, options)) });
        } catch (err) {
          // A server with a lower BATON_API_MAX_SUBMIT_BATCH refused the batch whole, storing
          // nothing: send it again in batches it takes, and this client's later calls too.
          const limit = serverBatchLimit(err);
          if (limit !== undefined && limit < batch.length) batchSize = size = limit;
          // A body larger than the server takes is refused before it is read, so nothing of it is
          // stored either: this call's batches are halved until they fit (or one item is too large alone).
          else if (tooLarge(err) && batch.length > 1) size = Math.ceil(batch.length / 2);
          else {
            const note = storedNote(results);
            const error = tooLarge(err) ? inputTooLarge(`items[${start}].input`, batch[0]!.input, url, note) : itemError(err, batch, start, note);
            if (!(error instanceof Error)) throw error;
            // Every item's outcome: the earlier batches' as the server gave them, then this batch's
            // and the later ones', none stored (a request that got no answer may have been: NETWORK).
            throw withResults(error, [...results, ...items.slice(start).map((): SubmitManyResult => ({ ok: false, error }))]);
          }
          start -= size; // the loop adds it back: the same start, smaller batches
          continue;
        }
        for (const r of d.submitExecutions.results) {
          if (r.error === null) results.push({ ok: true, submitted: { executionId: r.executionId, created: r.created, status: r.status! } });
          // Not stored, alone (its key names an earlier, different request; the store refused or failed it).
          else if (r.error.code === 'IDEMPOTENCY_CONFLICT') {
            const error = fromGraphQLError({ message: r.error.message, extensions: { code: r.error.code, executionId: r.executionId } }, { idempotencyKey: items[start + r.index]!.idempotencyKey ?? '' });
            results.push({ ok: false, error });
          } else results.push({ ok: false, error: new BatonApiError(r.error.code, r.error.message) });
        }
      }
      return submittedOrThrow(results);
    },
    async cancel(id, reason) {
      type Answer = { cancelExecution: { executionId: string; status: ExecutionStatus; outcome: string; message: string } };
      // The store's answer for one already finished: a CONFLICT carrying outcome TOO_LATE and its status (src/api/mutations.ts).
      const tooLate = (e: GraphQLErrorBody): Answer | undefined => {
        const ext = e.extensions ?? {};
        if (ext['code'] !== 'CONFLICT' || ext['outcome'] !== 'TOO_LATE' || typeof ext['status'] !== 'string') return undefined;
        return { cancelExecution: { executionId: id, status: ext['status'] as ExecutionStatus, outcome: 'TOO_LATE', message: e.message } };
      };
      try {
        const d = await request<Answer>(
          `mutation Cancel($id: ID!, $reason: String) { cancelExecution(id: $id, reason: $reason) { executionId status outcome message } }`,
          { id, ...(reason !== undefined && { reason }) },
          { executionId: id },
          tooLate,
        );
        const r = d.cancelExecution;
        return { executionId: r.executionId, status: r.status, outcome: OUTCOMES[r.outcome] ?? 'cancel-requested', message: r.message };
      } catch (err) {
        // A server without that answer: a CONFLICT is too late when the read model already shows it final.
        if (err instanceof BatonApiError && err.code === 'CONFLICT') {
          const view = await get(id);
          if (view?.final) return { executionId: id, status: view.status, outcome: 'too-late', message: err.message };
        }
        throw err;
      }
    },
    get,
    async history(id) {
      const d = await request<{ execution: { history: { revision: number; type: string; by: string; recordedAt: string; data: unknown; stateBefore: ExecutionStatus | null; state: ExecutionStatus }[] } | null }>(
        `query History($id: ID!) { execution(id: $id) { history { revision type by recordedAt data(whole: true) stateBefore state } } }`,
        { id },
        { executionId: id },
      );
      if (!d.execution) throw fromGraphQLError({ message: `execution ${id} not found`, extensions: { code: 'NOT_FOUND' } }, { executionId: id });
      return d.execution.history.map((h) => ({ ...h, stateBefore: h.stateBefore ?? undefined }));
    },
    async *updates(id, signal) {
      const ac = new AbortController(); // the caller's signal, or this client's close()
      const stop = () => ac.abort();
      signal?.addEventListener('abort', stop, { once: true });
      inFlight.add(ac);
      try {
        // The subscription waits 10 s for an id the read model has not shown yet before it says
        // NOT_FOUND; `events` asks the event store (and the archive) at once, as the database client does.
        // Asked again while the API is out of reach (a restart), for as long as the caller waits.
        const exists = () => request(`query Exists($id: ID!) { events(executionId: $id, limit: 1) { revision } }`, { id }, { executionId: id }, undefined, ac.signal);
        if ((await retrying(exists, ac.signal)) === undefined) return;
        yield* followExecution({
          url,
          headers,
          query: `subscription Updates($id: ID!) { executionUpdated(id: $id) { ${VIEW_FIELDS} } }`,
          executionId: id,
          signal: ac.signal,
          toView: (data) => {
            const row = (data as { executionUpdated?: ExecutionRowJson } | null | undefined)?.executionUpdated;
            return row ? viewOfRow(row) : undefined;
          },
          connectTimeoutMs: REQUEST_TIMEOUT_MS,
        });
      } finally {
        signal?.removeEventListener('abort', stop);
        inFlight.delete(ac);
        ac.abort();
      }
    },
    async close() {
      for (const ac of inFlight) ac.abort();
    },
  };
}

const SUBMIT_MANY = `mutation SubmitMany($inputs: [SubmitExecutionInput!]!) {
  submitExecutions(inputs: $inputs) { results { index executionId created status error { code message } } }
}`;

interface SubmitExecutionsItemJson {
  index: number;
  executionId: string;
  created: boolean;
  status: ExecutionStatus | null;
  error: { code: string; message: string } | null;
}

/** The server's BATON_API_MAX_SUBMIT_BATCH, when `err` is its refusal of a call with more inputs. */
function serverBatchLimit(err: unknown): number | undefined {
  if (!(err instanceof InvalidInputError)) return undefined;
  const m = /^at most (\d+) submissions in one call/.exec(err.problems.find((p) => p.path === 'inputs')?.message ?? '');
  const limit = m ? Number(m[1]) : NaN;
  return limit >= 1 ? limit : undefined;
}

/** What a refusal of a batch adds: which of the earlier batches' items were stored. */
function storedNote(earlier: readonly SubmitManyResult[]): string {
  if (earlier.length === 0) return '';
  const stored = earlier.filter((r) => r.ok).length;
  const items = `items 0 to ${earlier.length - 1}, the earlier batches,`;
  return stored === earlier.length ? ` (${items} were submitted)` : ` (of ${items} ${stored} were submitted; the error's \`results\` says which)`;
}

/** The server refused the request's body as larger than it takes (BATON_API_MAX_BODY_BYTES), before reading it. */
const tooLarge = (err: unknown) => err instanceof BatonApiError && err.code === 'REQUEST_ENTITY_TOO_LARGE';

/** That refusal, named by the input it carried: within the JSON limits, but not within this server's body limit. */
function inputTooLarge(at: string, input: unknown, url: URL, note = ''): InvalidInputError {
  const bytes = Buffer.byteLength(JSON.stringify(input ?? null));
  const error = new InvalidInputError([{ path: at, message: `is ${bytes} bytes as JSON, larger than a request the Baton API at ${url.href} takes (its BATON_API_MAX_BODY_BYTES, 1 MiB by default)` }]);
  error.message += note;
  return error;
}

/**
 * A batch's refusal with its items named as the client's caller knows them: the server's
 * `inputs.3.input.n` of the batch starting at 500 is `items[503].input.n`; an item whose input
 * alone does not fit its action's schema is InvalidActionInputError (`items[503]: invalid input
 * for action …`), as over the database. Earlier batches, already stored, are named.
 */
function itemError(err: unknown, batch: readonly SubmitItem[], start: number, note: string): unknown {
  if (!(err instanceof BatonError)) return err;
  if (err instanceof InvalidInputError) {
    const asItem = (_: string, n: string) => `items[${start + Number(n)}]`;
    // Named as the caller knows them: `inputs.3.priority` and "the same key as inputs.0" are items of all it passed.
    const problems = err.problems.map((p) => ({ ...p, path: p.path.replace(/^inputs\.(\d+)(?=\.|$)/, asItem), message: p.message.replace(/\binputs\.(\d+)\b/g, asItem) }));
    const items = new Set(problems.map((p) => /^items\[(\d+)\]/.exec(p.path)?.[1]));
    const only = items.size === 1 ? [...items][0] : undefined;
    const inputOnly = only !== undefined && problems.every((p) => p.path.startsWith(`items[${only}].input`));
    const item = only === undefined ? undefined : batch[Number(only) - start];
    let typed: BatonError;
    if (inputOnly && item) {
      const action = typeof item.action === 'string' ? item.action.replace(/@\d+$/, '') : item.action.name;
      typed = new InvalidActionInputError(action, problems.map((p) => ({ path: p.path.replace(/^items\[\d+\]\.input\.?/, ''), message: p.message })));
      typed.message = `items[${only}]: ${typed.message}`;
    } else {
      typed = new InvalidInputError(problems);
    }
    typed.message += note;
    return typed;
  }
  err.message = err.message.replace(/\binputs\.(\d+)\b/g, (_, n: string) => `items[${start + Number(n)}]`) + note;
  return err;
}
