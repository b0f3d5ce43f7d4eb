// Actions every worker offers: `core.*` for tests, demos and benchmarks, and
// `http.request` for the most common real job (call a webhook, poll an API).
import { z } from 'zod';
import { ActionError, defineAction, type ActionContext } from './action.ts';
import { runSignal } from './abort.ts';
import type { Json } from '../input/rules.ts';
import { jsonValue } from '../input/schemas.ts';

/** The longest core.sleep: one day. */
export const MAX_SLEEP_MS = 86_400_000;

export const noop = defineAction({
  name: 'core.noop',
  input: jsonValue(),
  run: () => null,
});

export const echo = defineAction({
  name: 'core.echo',
  input: jsonValue(),
  run: (input) => input,
});

/** Resolves after `ms`, or rejects with the signal's reason as soon as the signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export const sleepAction = defineAction({
  name: 'core.sleep',
  input: z.object({ ms: z.number().int().min(0).max(MAX_SLEEP_MS) }),
  async run({ ms }, ctx) {
    await sleep(ms, ctx.signal);
    return null;
  },
});

export const fail = defineAction({
  name: 'core.fail',
  input: z.object({
    message: z.string().min(1),
    retryable: z.boolean().default(true),
    /** ActionError.type; default "ActionError". */
    type: z.string().min(1).optional(),
  }),
  run({ message, retryable, type }): never {
    throw new ActionError(message, { retryable, ...(type !== undefined && { type }) });
  },
});

// ---------------------------------------------------------------------------
// http.request

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
    headers: z.record(z.string(), z.string()).optional(),
    /** A string is sent as is; anything else as JSON (content-type application/json unless headers set one). */
    body: jsonValue().optional(),
    /** Whole request, body included. */
    timeoutMs: z.number().int().positive().max(MAX_SLEEP_MS).default(HTTP_DEFAULT_TIMEOUT_MS),
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

export const httpRequest = defineAction({
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
      const res = await fetch(url, { method, headers, ...(body !== undefined && { body }), signal: run.signal });
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

/** Abort reasons surface as themselves; anything else fetch throws becomes a retryable network error. */
function explain(err: unknown, signal: AbortSignal, ctx: ActionContext, what: string): unknown {
  if (err instanceof ActionError) return err;
  if (signal.aborted) return signal.reason ?? ctx.signal.reason;
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

/** Every built-in action, for createActionRegistry([...builtinActions, ...yours]). */
export const builtinActions = [noop, echo, sleepAction, fail, httpRequest] as const;
