// One LISTEN connection per pool, shared by every channel the process listens on (the event
// store's, the work queue's, its signals' and dead letters'; see src/eventstore/pg-wakeups.ts).
//
// Why shared: on every NOTIFY, Postgres signals every backend that LISTENs in the database,
// whatever its channel (async.c, SignalBackends), and each one wakes and reads the notification
// queue. A host process with the Postgres work queue held four LISTEN connections, so every
// NOTIFY woke four of its backends (each used 0.06–0.08 s of CPU per 8 s of `baton bench`), and
// it kept four connections out of its pool for that.
//
// A lost connection is replaced after a second, every channel LISTENed again, and every listener
// told (`listening`), since what was sent meanwhile is lost: its waiters re-read.
import type pg from 'pg';
import type { Logger } from 'pino';

export interface ChannelListener {
  /** A NOTIFY on the channel (its payload, '' for none). Must not throw. */
  notification(payload: string): void;
  /** The channel is listened to again after a lost connection: anything sent meanwhile is lost. */
  relistened(): void;
}

const RECONNECT_MS = 1000;

class SharedListen {
  readonly #channels = new Map<string, Set<ChannelListener>>();
  /** Channels LISTENed on #client. */
  readonly #listened = new Set<string>();
  #client: pg.PoolClient | undefined;
  #connecting: Promise<pg.PoolClient> | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger | undefined,
  ) {}

  /** Listen to `channel` for `listener`; resolves once the channel is LISTENed. On failure it throws, and keeps retrying every second. */
  async add(channel: string, listener: ChannelListener): Promise<void> {
    let listeners = this.#channels.get(channel);
    if (!listeners) this.#channels.set(channel, (listeners = new Set()));
    listeners.add(listener);
    try {
      await this.#listen(channel);
    } catch (err) {
      this.#scheduleReconnect();
      throw err;
    }
  }

  /** Stop delivering to `listener`; the connection is closed once no channel is left. */
  async remove(channel: string, listener: ChannelListener): Promise<void> {
    const listeners = this.#channels.get(channel);
    if (!listeners?.delete(listener) || listeners.size > 0) return;
    this.#channels.delete(channel);
    await this.#unlistenUnused(channel);
  }

  /** UNLISTEN a channel nobody listens to any more; close the connection once none is left. */
  async #unlistenUnused(channel: string): Promise<void> {
    const client = this.#client;
    if (client && this.#listened.delete(channel)) await client.query(`UNLISTEN ${channel}`).catch(() => undefined);
    if (this.#channels.size > 0) return;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    if (this.#client === client) this.#drop();
  }

  async #listen(channel: string): Promise<void> {
    const client = await this.#connection();
    if (this.#listened.has(channel)) return;
    try {
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      // The connection broke between connect and LISTEN (a terminated backend, a restart): give it
      // back destroyed, or every reconnect attempt would keep one checked out.
      if (this.#client === client) this.#drop(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    if (this.#client !== client) return;
    this.#listened.add(channel);
    // Removed while LISTEN ran: nobody wants it now.
    if (!this.#channels.has(channel)) await this.#unlistenUnused(channel);
  }

  #connection(): Promise<pg.PoolClient> {
    if (this.#client) return Promise.resolve(this.#client);
    this.#connecting ??= this.pool
      .connect()
      .then((client) => {
        client.on('notification', (n) => {
          for (const l of [...(this.#channels.get(n.channel) ?? [])]) {
            try {
              l.notification(n.payload ?? '');
            } catch (err) {
              // Thrown inside pg's socket handler it would take the connection down.
              this.log?.error({ err, channel: n.channel }, 'notification listener threw; ignored');
            }
          }
        });
        // Stays attached for the client's life: pg emits 'error' on a client without a listener
        // as an uncaught exception, and a dropped client may still emit one on its way out.
        client.on('error', (err) => {
          if (this.#client !== client) return; // not (or no longer) the listening connection
          this.log?.warn({ err, channels: [...this.#channels.keys()] }, 'LISTEN connection lost; reconnecting');
          this.#drop(err);
          this.#scheduleReconnect();
        });
        this.#client = client;
        return client;
      })
      .finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  #drop(err?: Error): void {
    const client = this.#client;
    this.#client = undefined;
    this.#listened.clear();
    if (client) {
      client.removeAllListeners('notification');
      client.release(err ?? true); // never back to the pool still listening
    }
  }

  #scheduleReconnect(): void {
    if (this.#reconnectTimer || this.#channels.size === 0) return;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      void this.#relisten();
    }, RECONNECT_MS);
    this.#reconnectTimer.unref();
  }

  async #relisten(): Promise<void> {
    try {
      for (const channel of [...this.#channels.keys()]) await this.#listen(channel);
    } catch (err) {
      this.log?.warn({ err, channels: [...this.#channels.keys()] }, 'LISTEN failed; waiters fall back to polling until it reconnects');
      this.#scheduleReconnect();
      return;
    }
    for (const listeners of this.#channels.values()) for (const l of [...listeners]) l.relistened();
  }
}

const byPool = new WeakMap<pg.Pool, SharedListen>();

/** The pool's shared LISTEN connection (made on first use; `log` is the first caller's). */
export function sharedListen(pool: pg.Pool, log?: Logger): SharedListen {
  let shared = byPool.get(pool);
  if (!shared) byPool.set(pool, (shared = new SharedListen(pool, log)));
  return shared;
}
