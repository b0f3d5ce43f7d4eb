// Wake-ups over Postgres LISTEN/NOTIFY: a channel on the pool's one LISTEN connection (shared by
// every instance on the pool: src/db/shared-listen.ts), shared by every waiter, and a notifier
// that coalesces NOTIFYs. Used by the event store (channel `baton_events`, subscriptions) and the
// Postgres work queue (`baton_work`, consumers).
//
// Why NOTIFY is sent after the append's commit instead of inside it: a NOTIFY inside a
// transaction takes a cluster-wide lock at commit, which serialises commits. Measured here
// (2 cores, PG 15, fsync on): single-row commits with a pg_notify in each ran 4,076/s at 8
// clients against 10,182/s without. So appends never notify; the notifier sends at most one
// NOTIFY in flight per process and one more if appends committed meanwhile. Subscribers in the
// same process are woken directly, without a round trip, and ignore the echo of this instance's
// own NOTIFY (its payload begins with the sender's id), which would only cost each of them another read;
// other processes (and other instances in this one) still wake on it. A lost NOTIFY (crash between commit and
// notify, listener reconnecting) only delays delivery until the subscriber's fallback poll.
// One exception: an append with no other append of its store in flight carries its own NOTIFY
// (postgres.ts): at light load there is no commit of ours for it to hold up, and it saves a
// statement on the way to the other processes.
//
// A local wake-up names its appender when it knows one (AppendOrigin in event-store.ts): an alarm
// (a `stream` subscription's) that the appender applies its own events for is not rung by it, so
// the executor's follower no longer reads back, batch after batch, what its own runtime appended.
//
// A channel may also carry data (the work transport's worker signals, `baton_signals`): onPayload
// hands each NOTIFY's payload to listeners, over the same LISTEN connection and reconnects.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';
import type { AppendOrigin } from './event-store.ts';
import { ASYNC_COMMIT } from '../db/async-commit.ts';
import { channelOf } from '../db/db-schema.ts';
import { carriesEvents, senderOf } from './pg-append-hints.ts';
import { sharedListen, type ChannelListener } from '../db/shared-listen.ts';

/** The event store's channel (the default). */
export const NOTIFY_CHANNEL = 'baton_events';

// Channels are interpolated into LISTEN/NOTIFY (identifiers cannot be bound), so only plain names.
const CHANNEL_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface Waiter {
  /** A counter that changes on every wake-up; read it before a query, pass it to waitSince after. */
  readonly seq: number;
  /** Resolve when a wake-up arrives after `seq`, after `timeoutMs`, or when the signal aborts. */
  waitSince(seq: number, timeoutMs: number, signal?: AbortSignal): Promise<void>;
}

/**
 * One subscriber's wake-up flag: rung by every local wake-up except those of the appenders it is
 * quiet for, and by every NOTIFY. Reset before a read; wait after it (at once if rung meanwhile).
 */
export interface Alarm {
  reset(): void;
  wait(timeoutMs: number, signal?: AbortSignal): Promise<void>;
  close(): void;
}

/**
 * Resolves at the first of: `attach`'s wake-up calling `done`, `timeoutMs`, the signal aborting.
 * `attach` registers `done` and returns how to unregister it; nothing is left behind either way.
 */
function wakeOrTimeout(timeoutMs: number, signal: AbortSignal | undefined, attach: (done: () => void) => () => void): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      detach();
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    signal?.addEventListener('abort', done, { once: true });
    const detach = attach(done);
  });
}

export class PgWakeups implements Waiter {
  /** Sent as the payload of this instance's NOTIFYs, so that its own listener can ignore them. */
  readonly #id = randomUUID();
  #seq = 0;
  #waiters = new Set<() => void>();
  #alarms = new Set<{ quietFor: ReadonlySet<AppendOrigin>; ring(): void }>();
  #payloadListeners = new Set<(payload: string) => void>();
  #listening: Promise<void> | undefined;
  #notifyInFlight: Promise<void> | undefined;
  #notifyAgain = false;
  #closed = false;

  /** The channel LISTENed and NOTIFYed: `channel`, suffixed with the pool's BATON_DB_SCHEMA if it has one (src/db/db-schema.ts). */
  readonly channel: string;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log?: Logger,
    /** The LISTEN/NOTIFY channel: a lower-case identifier. Default: the event store's. */
    channel: string = NOTIFY_CHANNEL,
  ) {
    if (!CHANNEL_NAME.test(channel)) throw new BatonError(`PgWakeups: channel must match ${CHANNEL_NAME} (got ${JSON.stringify(channel)})`);
    this.channel = channelOf(pool, channel);
  }

  get seq(): number {
    return this.#seq;
  }

  /** This instance's NOTIFY payload, for a statement that sends its own NOTIFY (then call wake(), not appended()). */
  get payload(): string {
    return this.#id;
  }

  /** Start listening (idempotent). Subscriptions call this before their first read. */
  ensureListening(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#listening ??= sharedListen(this.pool, this.log)
      .add(this.channel, this.#channelListener)
      // Anything committed while we were not listening is found by the re-read this triggers.
      .then(() => this.wake())
      .catch((err) => {
        this.#listening = undefined;
        this.log?.warn({ err, channel: this.channel }, 'LISTEN failed; waiters fall back to polling until it reconnects');
      });
    return this.#listening;
  }

  readonly #channelListener: ChannelListener = {
    notification: (payload) => {
      // Our own NOTIFY, echoed back: its waiters were woken directly when we sent it.
      if (senderOf(payload) === this.#id) return;
      for (const l of [...this.#payloadListeners]) {
        try {
          l(payload);
        } catch (err) {
          // Thrown inside pg's socket handler it would take the connection down.
          this.log?.error({ err, channel: this.channel }, 'notification payload listener threw; ignored');
        }
      }
      // A payload that carries its events (pg-append-hints.ts) was just acted on by the listeners
      // above: the executor's handoff append for a heard submit is built in microtasks. Waking the
      // followers after them (next turn of the event loop) keeps their confirming read off that
      // path. Woken first, the follower's scan went out ahead of the append: at 50 submits/s here
      // the append was sent 0.25–0.47 ms (p50) after the handoff was decided, 0.08 ms after this;
      // in the peers harness, pickup p50 3.16 → 2.74 ms (four pairs; README, Benchmarks).
      if (this.#payloadListeners.size > 0 && carriesEvents(payload)) setImmediate(() => this.wake());
      else this.wake();
    },
    relistened: () => this.wake(),
  };

  /**
   * Also hand every NOTIFY payload on the channel to `listener` (call ensureListening() to start).
   * Nothing is replayed: a payload sent while the connection was down is lost. Returns an unsubscribe function.
   */
  onPayload(listener: (payload: string) => void): () => void {
    this.#payloadListeners.add(listener);
    return () => this.#payloadListeners.delete(listener);
  }

  /** Wake every local subscription (but alarms quiet for `origin`, the appender, if named). */
  wake(origin?: AppendOrigin): void {
    this.#seq++;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
    for (const a of this.#alarms) if (origin === undefined || !a.quietFor.has(origin)) a.ring();
  }

  /** An alarm quiet for the appenders in `quietFor` (see Alarm); close() it when done. */
  alarm(quietFor: ReadonlySet<AppendOrigin> = new Set()): Alarm {
    let rung = false;
    let ringNow: (() => void) | undefined;
    const entry = {
      quietFor,
      ring: () => {
        rung = true;
        ringNow?.();
      },
    };
    this.#alarms.add(entry);
    return {
      reset: () => void (rung = false),
      wait: (timeoutMs, signal) =>
        rung || this.#closed
          ? Promise.resolve()
          : wakeOrTimeout(timeoutMs, signal, (done) => {
              ringNow = done;
              return () => (ringNow = undefined);
            }),
      close: () => void this.#alarms.delete(entry),
    };
  }

  /** Called after a write commits (an append, a publish): wake local waiters now (see wake), other processes via NOTIFY. */
  appended(origin?: AppendOrigin): void {
    this.wake(origin);
    this.#notify();
  }

  #notify(): void {
    if (this.#closed) return;
    if (this.#notifyInFlight) {
      this.#notifyAgain = true;
      return;
    }
    this.#notifyInFlight = this.#sendNotifies().finally(() => {
      this.#notifyInFlight = undefined;
      // One asked for after the loop's last look and before this ran was left to it: send it now.
      if (this.#notifyAgain) this.#notify();
    });
  }

  async #sendNotifies(): Promise<void> {
    do {
      this.#notifyAgain = false;
      try {
        // A NOTIFY's transaction gets an xid, so its commit would wait for a WAL flush of its own;
        // nothing in it needs to survive a crash.
        await this.pool.query({ name: `baton_notify_${this.channel}`, text: `SELECT pg_notify('${this.channel}', $1), ${ASYNC_COMMIT}`, values: [this.#id] });
      } catch (err) {
        // Waiters elsewhere will still catch up on their fallback poll.
        this.log?.warn({ err, channel: this.channel }, 'NOTIFY failed');
        this.#notifyAgain = false;
        return;
      }
    } while (this.#notifyAgain && !this.#closed);
  }

  waitSince(seq: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (seq !== this.#seq || this.#closed) return Promise.resolve();
    return wakeOrTimeout(timeoutMs, signal, (done) => {
      this.#waiters.add(done);
      return () => this.#waiters.delete(done);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#listening?.catch(() => undefined);
    await this.#notifyInFlight;
    await sharedListen(this.pool).remove(this.channel, this.#channelListener);
    this.#payloadListeners.clear();
    this.wake();
  }
}
