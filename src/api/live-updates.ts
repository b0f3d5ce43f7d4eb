// Live execution rows for `executionUpdated`. The projector NOTIFYs EXECUTIONS_CHANGED_CHANNEL
// with the ids of the rows each committed batch changed; one LISTEN connection per server hears
// them for every subscriber (a connection per subscriber would exhaust the pool), reads the
// changed rows that someone follows in one query, and hands each subscriber its row.
//
// Notifications can be lost (the LISTEN connection drops; nobody is listening yet), so the
// row is read again on every (re)connect and on every subscribe; revisions make repeats harmless.
//
// Each follower takes a slot (subscription-slots.ts), and one for an id the read model has not
// shown within `unknownGraceMs` ends with NOT_FOUND unless the event store has that execution
// (then the projector is merely behind, and it waits on). A follower sees only executions of the
// namespaces it may read (a namespace token's): another namespace's is, to it, one that does not
// exist, with the same wait and the same answer, so nothing tells the two apart.
import type pg from 'pg';
import type { Logger } from 'pino';
import { Repeater, SlidingBuffer } from 'graphql-yoga';
import { finalStatuses } from '../../actors/execution.machine.ts';
import type { ExecutionRow } from '../../projections/executions.ts';
import { EXECUTIONS_CHANGED_CHANNEL } from '../readmodel/notifications.ts';
import { channelOf } from '../db/db-schema.ts';
import { ApiError } from './errors.ts';
import type { SubscriptionSlots } from './subscription-slots.ts';

export { EXECUTIONS_CHANGED_CHANNEL };

const RECONNECT_DELAY_MS = 1_000;
/**
 * How long a subscription waits for an execution the read model has not shown before it asks
 * the event store. Ids come from submitExecution, which returns once the event is stored, so
 * this only covers the projector's lag (p99 < 1 s at full load) with a wide margin.
 */
export const UNKNOWN_EXECUTION_GRACE_MS = 10_000;

export interface ExecutionUpdates {
  /** Start listening if not yet; rejects when the database cannot be reached. */
  ready(): Promise<void>;
  /**
   * The row now (once it exists) and after each change; ends after a final status, or with a
   * NOT_FOUND ApiError (the last value) for an execution that does not exist. Throws
   * LIMIT_EXCEEDED when `client` or the server has no subscription slot left.
   */
  follow(executionId: string, client: string, inScope?: (namespace: string) => boolean): AsyncIterableIterator<ExecutionRow | ApiError>;
  /** Stop listening and end every follower. */
  close(): Promise<void>;
}

interface Follower {
  lastRevision: number;
  inScope(namespace: string): boolean;
  deliver(row: ExecutionRow): void;
  end(): void;
}

export function createExecutionUpdates(o: {
  pool: pg.Pool;
  readRows: (ids: readonly string[]) => Promise<ExecutionRow[]>;
  /** The execution's namespace if the event store has it (asked once the grace period passed without a row). */
  namespaceOf: (executionId: string) => Promise<string | undefined>;
  slots: SubscriptionSlots;
  /** Default UNKNOWN_EXECUTION_GRACE_MS. */
  unknownGraceMs?: number;
  log: Logger;
}): ExecutionUpdates {
  const unknownGraceMs = o.unknownGraceMs ?? UNKNOWN_EXECUTION_GRACE_MS;
  const followers = new Map<string, Set<Follower>>();
  let listener: pg.PoolClient | undefined;
  let listening: Promise<void> | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let closed = false;
  // Refresh coalescing: ids noted while a read is in flight are read together right after it.
  const pending = new Set<string>();
  let reading: Promise<void> | undefined;

  // This installation's channel (BATON_DB_SCHEMA: channels are per database, src/db/db-schema.ts).
  const channel = channelOf(o.pool, EXECUTIONS_CHANGED_CHANNEL);

  async function listen(): Promise<void> {
    const client = await o.pool.connect();
    client.on('notification', (msg) => {
      if (msg.channel === channel) refresh((msg.payload ?? '').split(','));
    });
    client.on('error', (err) => {
      o.log.warn({ err }, 'LISTEN connection lost; reconnecting');
      drop(client, err);
      scheduleReconnect();
    });
    try {
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      drop(client, err as Error);
      throw err;
    }
    if (closed) return drop(client);
    listener = client;
    // Whatever changed while nobody listened.
    refresh([...followers.keys()]);
  }

  function drop(client: pg.PoolClient, err?: Error): void {
    if (listener === client) listener = undefined;
    listening = undefined;
    client.removeAllListeners('notification');
    client.release(err ?? true);
  }

  function scheduleReconnect(): void {
    if (closed || reconnectTimer || followers.size === 0) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      ready().catch(() => scheduleReconnect());
    }, RECONNECT_DELAY_MS);
    reconnectTimer.unref();
  }

  function ready(): Promise<void> {
    if (closed) return Promise.resolve();
    listening ??= listen().catch((err: unknown) => {
      listening = undefined;
      throw err;
    });
    return listening;
  }

  function refresh(ids: readonly string[]): void {
    for (const id of ids) if (followers.has(id)) pending.add(id);
    if (reading || pending.size === 0) return;
    reading = (async () => {
      while (pending.size > 0 && !closed) {
        const batch = [...pending];
        pending.clear();
        try {
          for (const row of await o.readRows(batch)) deliver(row);
        } catch (err) {
          // The next notification or reconnect reads them again.
          o.log.warn({ err, executions: batch.length }, 'could not read changed executions for subscribers');
        }
      }
    })().finally(() => {
      reading = undefined;
      // Ids noted after the loop's last look and before this ran were left for it: read them now.
      if (pending.size > 0 && !closed) refresh([]);
    });
  }

  function deliver(row: ExecutionRow): void {
    for (const f of followers.get(row.executionId) ?? []) {
      if (row.revision <= f.lastRevision || !f.inScope(row.namespace)) continue;
      f.lastRevision = row.revision;
      f.deliver(row);
      if (finalStatuses.has(row.status)) f.end();
    }
  }

  function follow(executionId: string, client: string, inScope: (namespace: string) => boolean = () => true): AsyncIterableIterator<ExecutionRow | ApiError> {
    const release = o.slots.acquire(client);
    // A slow client gets the newest row, not a backlog: only the latest state matters, and the
    // final row, being the last, is never the one dropped.
    const repeater = new Repeater<ExecutionRow | ApiError>(async (push, stop) => {
      const follower: Follower = {
        lastRevision: -1,
        inScope,
        deliver: (row) => void push(row).catch(() => undefined),
        end: () => stop(),
      };
      let set = followers.get(executionId);
      if (!set) followers.set(executionId, (set = new Set()));
      set.add(follower);
      const endIfUnknown = async () => {
        if (follower.lastRevision >= 0) return;
        // When the store cannot say, keep waiting: ending a real execution's subscription is worse.
        const namespace = await o.namespaceOf(executionId).catch(() => null);
        const exists = namespace === null || (namespace !== undefined && inScope(namespace));
        if (exists || follower.lastRevision >= 0) return;
        void push(new ApiError('NOT_FOUND', `no execution ${executionId}: the event store has none (asked after waiting ${unknownGraceMs / 1000} s)`)).catch(() => undefined);
        stop();
      };
      const unknown = setTimeout(() => void endIfUnknown(), unknownGraceMs);
      try {
        // One that arrives while the server shuts down ends at once (its client follows again
        // once the server is back), not only at close()'s grace cut.
        if (closed) stop();
        refresh([executionId]); // the current row, read after registering so no change slips between
        await stop;
      } finally {
        clearTimeout(unknown);
        set.delete(follower);
        if (set.size === 0) followers.delete(executionId);
        release();
      }
    }, new SlidingBuffer(1));
    // A subscription ended before its first read never runs the body above: free its slot here too.
    const returnOf = repeater.return.bind(repeater);
    return Object.assign(repeater, {
      return(value?: unknown) {
        release();
        return returnOf(value);
      },
    });
  }

  return {
    ready,
    follow,
    async close() {
      closed = true;
      clearTimeout(reconnectTimer);
      for (const set of followers.values()) for (const f of set) f.end();
      await listening?.catch(() => undefined);
      await reading;
      const client = listener;
      if (client) {
        await client.query(`UNLISTEN ${channel}`).catch(() => undefined);
        drop(client);
      }
    },
  };
}
