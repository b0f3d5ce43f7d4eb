// Actions every worker offers: `core.*` for tests, demos and benchmarks, and
// `http.request` for the most common real job (call a webhook, poll an API; http-request.ts).
import { z } from 'zod';
import { ActionError, defineAction } from './action.ts';
import { jsonValue } from '../input/schemas.ts';
import { createHttpRequestAction } from './http-request.ts';

export { HTTP_DEFAULT_TIMEOUT_MS, HTTP_MAX_BODY_BYTES, HTTP_MAX_REDIRECTS, type HttpRequestInput, type HttpResponse } from './http-request.ts';

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

/** http.request reaching public addresses only (BATON_HTTP_ALLOW unset). */
export const httpRequest = createHttpRequestAction();

/** Every built-in action, for createActionRegistry([...builtinActions, ...yours]). */
export const builtinActions = [noop, echo, sleepAction, fail, httpRequest] as const;

/** The built-ins with http.request reaching also what `httpAllow` (BATON_HTTP_ALLOW) lists. */
export function configuredBuiltinActions(o: { httpAllow: readonly string[] }) {
  return [noop, echo, sleepAction, fail, createHttpRequestAction({ allow: o.httpAllow })] as const;
}
