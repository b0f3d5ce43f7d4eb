// Worker signals for the Postgres WorkTransport: NOTIFY on one channel, `baton_signals`, with the
// payload `{ workerId, signal }` (../internal.ts encodes it and keeps it under NOTIFY's 8000 bytes).
//
// Sending is one `SELECT pg_notify(...)` outside any transaction, so it is delivered when that
// statement commits (without waiting for a WAL flush: a signal is not a record). A NOTIFY takes a cluster-wide lock at commit (src/eventstore/pg-wakeups.ts
// has the cost), which is fine here: the executor rings about once a second per execution being
// cancelled.
//
// Receiving: every subscription of one transport instance shares its one LISTEN connection (a
// PgWakeups on this channel, which also reconnects it after a drop), and each instance sees the
// signals of every worker, routed here by workerId. Signals are few, so one channel is cheaper
// than a LISTEN per worker (channel names are identifiers; worker ids are not). A signal sent
// while the connection is down or reconnecting is lost: acceptable, the sender rings again.
import type pg from 'pg';
import type { Logger } from 'pino';
import { ASYNC_COMMIT } from '../../db/async-commit.ts';
import { BatonError } from '../../errors.ts';
import { PgWakeups } from '../../eventstore/pg-wakeups.ts';
import { decodeSignal, deliverSignal, encodeSignal, validateSignalSubscription } from '../internal.ts';
import type { SignalSubscription, WorkerSignal } from '../work-transport.ts';

export const SIGNAL_NOTIFY_CHANNEL = 'baton_signals';

export class PgSignals {
  readonly #listener: PgWakeups;
  /** Handlers by worker id; a handler leaves its set when its subscription stops. */
  readonly #handlers = new Map<string, Set<(signal: WorkerSignal) => void>>();
  #offPayload: (() => void) | undefined;
  #closed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log?: Logger,
  ) {
    this.#listener = new PgWakeups(pool, log, SIGNAL_NOTIFY_CHANNEL);
  }

  async send(workerId: string, signal: WorkerSignal): Promise<void> {
    const payload = encodeSignal(workerId, signal);
    try {
      await this.pool.query({ name: 'baton_signal_send', text: `SELECT pg_notify('${this.#listener.channel}', $1), ${ASYNC_COMMIT}`, values: [payload] });
    } catch (err) {
      throw new BatonError(`sendSignal to worker ${workerId} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async subscribe(workerId: string, handler: (signal: WorkerSignal) => void): Promise<SignalSubscription> {
    validateSignalSubscription(workerId, handler);
    this.#offPayload ??= this.#listener.onPayload((payload) => this.#route(payload));
    // Resolves once LISTEN ran (or failed and a reconnect is scheduled: logged by PgWakeups).
    await this.#listener.ensureListening();
    if (this.#closed) throw new BatonError('onSignal: the Postgres work transport was closed meanwhile');
    // A handler of its own, so the same function subscribed twice is two subscriptions.
    const own = (signal: WorkerSignal) => handler(signal);
    let set = this.#handlers.get(workerId);
    if (!set) this.#handlers.set(workerId, (set = new Set()));
    set.add(own);
    return {
      stop: async () => {
        const current = this.#handlers.get(workerId);
        if (!current?.delete(own)) return;
        if (current.size === 0) this.#handlers.delete(workerId);
      },
    };
  }

  #route(payload: string): void {
    const envelope = decodeSignal(payload, this.log);
    if (!envelope) return;
    const handlers = this.#handlers.get(envelope.workerId);
    if (!handlers) return; // another worker's, or this one's nobody here listens to
    for (const h of [...handlers]) {
      // Stopped by an earlier handler of this same signal: not called any more.
      if (handlers.has(h)) deliverSignal(h, envelope, this.log);
    }
  }

  /** Ends every subscription and releases the LISTEN connection. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#handlers.clear();
    this.#offPayload?.();
    await this.#listener.close();
  }
}
