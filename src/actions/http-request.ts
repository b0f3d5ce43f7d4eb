// http.request, the built-in action for the most common real job: call a webhook, poll an API.
// It reaches public addresses only unless BATON_HTTP_ALLOW says otherwise (outbound-address.ts):
// every connection, the first and each redirect's, resolves through the address policy, and
// redirects are followed here, hop by hop, so each new host is checked before it is reached.
import { Agent, fetch, Headers, type Response } from 'undici';
import { z } from 'zod';
import { ActionError, defineAction, type ActionContext } from './action.ts';
import { runSignal } from './abort.ts';
import type { Json } from '../input/rules.ts';
import { jsonValue, protoKeyRefusal, withoutProtoKey } from '../input/schemas.ts';
import { createAddressPolicy, type AddressPolicy, type AddressPolicyOptions } from './outbound-address.ts';

/** The longest request: one day, like core.sleep. */
const MAX_TIMEOUT_MS = 86_400_000;
/** Redirects followed before the attempt fails (fetch follows 20; a webhook needs one or two). */
export const HTTP_MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
// Sent to the host that asked for them, never on to another one a redirect names.
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/** Responses larger than this fail the attempt instead of landing in the event history. */
export const HTTP_MAX_BODY_BYTES = 1024 * 1024;
export const HTTP_DEFAULT_TIMEOUT_MS = 10_000;

const HttpRequestInput = z
  .object({
    url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }),
    method: z
      .string()
      .transform((m) => m.toUpperCase())
      .pipe(z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']))
      .default('GET'),
    headers: withoutProtoKey(z.record(z.string(), z.string()), protoKeyRefusal('a header name')).optional(),
    /** A string is sent as is; anything else as JSON (content-type application/json unless headers set one). */
    body: jsonValue().optional(),
    /** Whole request, body included. */
    timeoutMs: z.number().int().positive().max(MAX_TIMEOUT_MS).default(HTTP_DEFAULT_TIMEOUT_MS),
    /**
     * Fail the attempt on a 4xx/5xx status (retryable for 408, 429 and 5xx) instead of
     * returning it. Off by default: a status is an answer, and the caller may want a 404.
     */
    failOnHttpError: z.boolean().default(false),
  })
  .refine((i) => i.body === undefined || (i.method !== 'GET' && i.method !== 'HEAD'), {
    message: 'a GET or HEAD request cannot have a body',
    path: ['body'],
  });
export type HttpRequestInput = z.input<typeof HttpRequestInput>;

export type { Json };
export interface HttpResponse {
  status: number;
  /** Lower-case names, as fetch gives them. */
  headers: Record<string, string>;
  /** Parsed when the content-type is JSON (`application/json`, `*+json`), text otherwise; null when empty. */
  body: Json;
}

const isJsonContentType = (ct: string | null) => ct !== null && /^application\/([\w.-]+\+)?json\b/i.test(ct.trim());

/** The http.request action, reaching public addresses and whatever `allow` (BATON_HTTP_ALLOW) lists. */
export function createHttpRequestAction(o: AddressPolicyOptions = {}) {
  const policy = createAddressPolicy(o);
  // One connection pool per action, every socket resolved through the policy's lookup.
  let agent: Agent | undefined;
  const dispatcher = () => (agent ??= new Agent({ connect: { lookup: policy.lookup } }));
  return defineAction({
    name: 'http.request',
    input: HttpRequestInput,
    async run(input, ctx): Promise<HttpResponse> {
      const { url, method, timeoutMs } = input;
      const headers = new Headers(input.headers);
      let body: string | undefined;
      if (input.body !== undefined) {
        body = typeof input.body === 'string' ? input.body : JSON.stringify(input.body);
        if (typeof input.body !== 'string' && !headers.has('content-type')) headers.set('content-type', 'application/json');
      }
      const timeoutError = () =>
        new ActionError(`http.request ${method} ${url} timed out after ${timeoutMs} ms`, { type: 'HttpTimeout' });
      const run = runSignal(ctx.signal, timeoutMs, timeoutError);
      try {
        const res = await fetchFollowing(policy, dispatcher(), { url: new URL(url), method, headers, body }, run.signal);
        const text = await readCapped(res, url);
        const contentType = res.headers.get('content-type');
        const parsed = isJsonContentType(contentType) ? parseJson(text, url, contentType) : text;
        ctx.log.debug({ http: { method, url, status: res.status, bytes: Buffer.byteLength(text) } }, 'http.request done');
        if (input.failOnHttpError && res.status >= 400) {
          const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
          throw new ActionError(`http.request ${method} ${url} answered ${res.status} ${res.statusText}`.trim(), {
            type: 'HttpError',
            retryable,
          });
        }
        return { status: res.status, headers: Object.fromEntries(res.headers), body: parsed };
      } catch (err) {
        throw explain(err, run.signal, ctx, `${method} ${url}`);
      } finally {
        run.dispose();
      }
    },
  });
}

interface Hop {
  url: URL;
  method: string;
  headers: Headers;
  body: string | undefined;
}

/**
 * fetch with redirects followed by hand: each hop's host is checked (an IP literal here, a name
 * in the agent's lookup) before anything is sent to it. 303, and 301/302 after a POST, go on as
 * a GET without the body, as fetch does; credentials are not carried to another origin.
 */
async function fetchFollowing(policy: AddressPolicy, dispatcher: Agent, first: Hop, signal: AbortSignal): Promise<Response> {
  let hop = first;
  for (let redirects = 0; ; redirects++) {
    policy.checkLiteral(hop.url.hostname);
    const res = await fetch(hop.url, { method: hop.method, headers: hop.headers, body: hop.body ?? null, signal, redirect: 'manual', dispatcher });
    const location = res.headers.get('location');
    if (!REDIRECT_STATUSES.has(res.status) || location === null) return res;
    await res.body?.cancel().catch(() => undefined);
    const next = new URL(location, hop.url);
    if (redirects >= HTTP_MAX_REDIRECTS) {
      throw new ActionError(`http.request ${first.url}: more than ${HTTP_MAX_REDIRECTS} redirects (the last to ${next})`, { type: 'HttpTooManyRedirects', retryable: false });
    }
    if (next.protocol !== 'http:' && next.protocol !== 'https:') {
      throw new ActionError(`http.request ${first.url}: redirected to ${next.protocol} (only http and https are followed)`, { type: 'HttpRedirectRefused', retryable: false });
    }
    const asGet = res.status === 303 ? hop.method !== 'HEAD' : (res.status === 301 || res.status === 302) && hop.method === 'POST';
    const headers = new Headers(hop.headers);
    if (asGet) for (const name of ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location']) headers.delete(name);
    if (next.origin !== hop.url.origin) for (const name of CREDENTIAL_HEADERS) headers.delete(name);
    hop = { url: next, method: asGet ? 'GET' : hop.method, headers, body: asGet ? undefined : hop.body };
  }
}

/**
 * Abort reasons surface as themselves, and so does an ActionError from the address policy (fetch
 * wraps what the lookup throws as its cause); anything else becomes a retryable network error.
 */
function explain(err: unknown, signal: AbortSignal, ctx: ActionContext, what: string): unknown {
  if (err instanceof ActionError) return err;
  if (signal.aborted) return signal.reason ?? ctx.signal.reason;
  const refused = (err as { cause?: unknown }).cause;
  if (refused instanceof ActionError) return refused;
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const detail = cause?.code ?? cause?.message ?? (err as Error).message;
  return new ActionError(`http.request ${what} failed: ${detail}`, { type: 'HttpNetworkError', cause: err });
}

/** The body as text, refusing (and cancelling the download) past HTTP_MAX_BODY_BYTES. */
async function readCapped(res: Response, url: string): Promise<string> {
  const tooLarge = (size: string) =>
    new ActionError(
      `http.request ${url}: response body is ${size}, over the ${HTTP_MAX_BODY_BYTES} byte (1 MiB) limit; ` +
        'results are stored in the execution history, so store large payloads elsewhere and return a reference',
      { type: 'HttpResponseTooLarge', retryable: false },
    );
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > HTTP_MAX_BODY_BYTES) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(`${declared} bytes`);
  }
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > HTTP_MAX_BODY_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(`more than ${HTTP_MAX_BODY_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string, url: string, contentType: string | null): Json {
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text) as Json;
  } catch (err) {
    throw new ActionError(
      `http.request ${url}: content-type is ${contentType} but the body is not JSON (${(err as Error).message}); ` +
        `it starts ${JSON.stringify(text.slice(0, 100))}`,
      { type: 'HttpInvalidJson', retryable: false, cause: err },
    );
  }
}

