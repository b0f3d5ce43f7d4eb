// Following one execution over the API's `executionUpdated` subscription: GraphQL over SSE in the
// "distinct connections" protocol graphql-yoga serves (a POST whose response is `event: next` /
// `event: complete` blocks). Done by hand rather than with graphql-sse's client because a follow
// must outlive its streams: one the server ends while the execution is not final (a graceful
// shutdown, every deploy) or that drops or stalls is opened again, with backoff, for as long as
// the caller's signal allows; a refusal (401, 403, 429, any 4xx) is not retried and keeps the
// API's own code and message. The server sends the current row to every new stream, so rows
// at or below the last revision yielded are skipped.
import { Backoff } from '../async/backoff.ts';
import { sleep } from '../async/sleep.ts';
import { BatonError } from '../errors.ts';
import { BatonApiError, fromGraphQLError, type GraphQLErrorBody } from './errors.ts';
import type { ExecutionView } from './types.ts';

/** First wait before opening a lost stream again; doubled up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;
/** The server pings every 12 s (graphql-yoga): this long with no byte is a stalled stream. */
const STREAM_IDLE_MS = 30_000;
/** Without a stream for this long, a follow gives up (BatonApiError NETWORK) unless the caller stopped first. */
export const RECONNECT_WINDOW_MS = 5 * 60_000;

interface Payload {
  data?: unknown;
  errors?: readonly GraphQLErrorBody[];
}

/** A failure worth opening the stream again for: the network, a stall, a 5xx. */
class Lost extends Error {}

export interface FollowOptions {
  url: URL;
  headers: Record<string, string>;
  query: string;
  executionId: string;
  /** The caller's: when it aborts the follow ends (returns). */
  signal: AbortSignal;
  /** The row of one `next` payload's data as a view (undefined: none). */
  toView: (data: unknown) => ExecutionView | undefined;
  /** How long to wait for the response's headers. */
  connectTimeoutMs: number;
}

/** The execution's views, each revision once, until a final one; throws a typed error when it cannot go on. */
export async function* followExecution(o: FollowOptions): AsyncGenerator<ExecutionView> {
  const { signal, executionId } = o;
  let last = -1;
  const backoff = new Backoff(RETRY_FIRST_MS, RETRY_MAX_MS);
  let failingSince: number | undefined;
  for (;;) {
    if (signal.aborted) return;
    let why: string;
    try {
      for await (const payload of stream(o)) {
        failingSince = undefined; // the API answered
        const first = payload.errors?.[0];
        if (first) throw fromGraphQLError(first, { executionId });
        const view = o.toView(payload.data);
        if (!view || view.revision <= last) continue;
        last = view.revision;
        backoff.reset();
        yield view;
        if (view.final) return;
      }
      why = 'the API ended the stream before the execution finished (a restart?)';
    } catch (err) {
      if (signal.aborted) return;
      if (!(err instanceof Lost)) throw err;
      why = err.message;
    }
    const now = Date.now();
    failingSince ??= now;
    if (now - failingSince >= RECONNECT_WINDOW_MS) {
      throw new BatonApiError('NETWORK', `lost the updates of execution ${executionId} and could not follow them again within ${RECONNECT_WINDOW_MS / 1000} s: ${why}`);
    }
    await sleep(jittered(backoff.take()), signal);
  }
}

/** A failure the network or a restarting API causes, worth trying again. */
export const transient = (err: unknown) => err instanceof BatonApiError && (err.code === 'NETWORK' || err.code === 'SERVICE_UNAVAILABLE' || /^HTTP_5\d\d$/.test(err.code));

/**
 * `call`, again with backoff while it fails as a restarting API does (`transient`), until
 * `signal` aborts (then undefined) or RECONNECT_WINDOW_MS passed (then its last failure).
 */
export async function retrying<T>(call: () => Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  const began = Date.now();
  const backoff = new Backoff(RETRY_FIRST_MS, RETRY_MAX_MS);
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (signal.aborted) return undefined;
      if (!transient(err) || Date.now() - began >= RECONNECT_WINDOW_MS) throw err;
    }
    await sleep(jittered(backoff.take()), signal);
    if (signal.aborted) return undefined;
  }
}

/** Between half and all of `ms`: many clients of one restarting API do not come back in step. */
const jittered = (ms: number) => ms / 2 + Math.random() * (ms / 2);

/** One stream's payloads; returns when the server ends it, throws Lost for what is worth a retry. */
async function* stream(o: FollowOptions): AsyncGenerator<Payload> {
  const ac = new AbortController();
  const stop = () => ac.abort();
  o.signal.addEventListener('abort', stop, { once: true });
  let idle: NodeJS.Timeout | undefined;
  let stalled = '';
  const arm = (ms: number, what: string) => {
    clearTimeout(idle);
    idle = setTimeout(() => ((stalled = what), ac.abort()), ms);
  };
  const lost = (err: unknown) => (err instanceof BatonError || err instanceof Lost ? err : new Lost(stalled || `the update stream failed: ${(err as Error)?.message ?? String(err)}`, { cause: err }));
  try {
    arm(o.connectTimeoutMs, `the API did not answer the subscription within ${o.connectTimeoutMs / 1000} s`);
    let res: Response;
    try {
      res = await fetch(o.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...o.headers },
        body: JSON.stringify({ query: o.query, variables: { id: o.executionId } }),
        signal: ac.signal,
      });
      if (!res.ok) throw refusal(res.status, await res.text(), o.executionId);
    } catch (err) {
      throw lost(err);
    }
    if (!res.body) throw new Lost('the API answered the subscription without a body');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = '';
    for (;;) {
      arm(STREAM_IDLE_MS, `the update stream stalled: nothing for ${STREAM_IDLE_MS / 1000} s`);
      let chunk: ReadableStreamReadResult<string>;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw lost(err);
      }
      clearTimeout(idle); // not while the caller handles a view
      if (chunk.done) return;
      buffered += chunk.value;
      for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
        const event = parseEvent(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
        if (event.event === 'complete') return;
        if (event.event === 'next' && event.data) yield JSON.parse(event.data) as Payload;
      }
    }
  } finally {
    clearTimeout(idle);
    o.signal.removeEventListener('abort', stop);
    ac.abort();
  }
}

function parseEvent(block: string): { event: string; data: string } {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  return { event, data: data.join('\n') };
}

/**
 * A subscription the API did not take: its GraphQL error as the typed error (UNAUTHENTICATED,
 * FORBIDDEN, LIMIT_EXCEEDED with the API's message), as the query path gives it. A 5xx is Lost
 * (a proxy's 502 while the API restarts; SERVICE_UNAVAILABLE while its database is away).
 */
function refusal(status: number, body: string, executionId: string): Error {
  let first: GraphQLErrorBody | undefined;
  try {
    first = (JSON.parse(body) as Payload).errors?.[0];
  } catch {
    // Refused after the stream started (yoga answers the status with the error as an SSE event).
    const data = body.split('\n').find((l) => l.startsWith('data:') && l.length > 6);
    try {
      first = data ? (JSON.parse(data.slice(5)) as Payload).errors?.[0] : undefined;
    } catch {
      first = undefined;
    }
  }
  const typed = first ? fromGraphQLError(first, { executionId }) : new BatonApiError(`HTTP_${status}`, `the Baton API refused the update stream with ${status}: ${body.slice(0, 200)}`);
  return status >= 500 || status === 408 ? new Lost(typed.message, { cause: typed }) : typed;
}
