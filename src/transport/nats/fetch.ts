// One JetStream pull, as both the worker consumers and the dead-letter subscribers make it.
import type { Consumer as JsConsumer, JsMsg } from 'nats';
import { PULL_AGAIN, type PullEnd } from '../pull-loop.ts';
import { PULL_EXPIRES_MS } from './context.ts';

/**
 * Fetch at most `max` messages from `consumer` and hand each to `each` (awaited, one after
 * another) as it arrives. The fetch long-polls at the server for up to PULL_EXPIRES_MS. When
 * `signal` aborts the fetch is closed, and what arrives after that, or beyond `max` (after a
 * reset), is nak'ed: not ours to handle, so another consumer gets it now. Throws what the fetch
 * throws.
 *
 * Ends with PULL_AGAIN, or a back-off (`endedEarly`) when it ended early with nothing (a 409
 * such as max-waiting): pulling again at once would spin on it.
 */
export async function fetchInto(consumer: JsConsumer, max: number, signal: AbortSignal, each: (m: JsMsg) => void | Promise<void>, endedEarly: string): Promise<PullEnd> {
  const started = performance.now();
  let received = 0;
  const batch = await consumer.fetch({ max_messages: max, expires: PULL_EXPIRES_MS });
  const close = () => void batch.close().catch(() => undefined);
  if (signal.aborted) close();
  else signal.addEventListener('abort', close, { once: true });
  try {
    for await (const m of batch) {
      received++;
      if (received > max || signal.aborted) m.nak();
      else await each(m);
    }
  } finally {
    signal.removeEventListener('abort', close);
  }
  if (received === 0 && performance.now() - started < PULL_EXPIRES_MS * 0.9) return { next: 'back-off', why: endedEarly };
  return PULL_AGAIN;
}
