// Shared by the actions.*.test.ts files and outbound-address.test.ts: an ActionContext to run actions with, and a way to
// get at a promise's rejection.
import type { ActionContext } from '../../src/actions/action.ts';
import { silentLogger } from '../../src/log.ts';

export function ctx(over: Partial<ActionContext> = {}): ActionContext {
  return {
    executionId: '00000000-0000-4000-8000-000000000001',
    attempt: 1,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    tag: async () => undefined,
    log: silentLogger(),
    ...over,
  };
}

/** What a promise settled with, so a test can assert on a rejection's class and fields. */
async function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  const r = await settle(p);
  if (r.ok) throw new Error(`expected a rejection, got ${JSON.stringify(r.value)}`);
  return r.error;
}
