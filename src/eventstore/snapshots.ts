// Snapshots of long streams: the state an actor's stream folds to at one revision, so that a
// load reads and folds only the events after it (src/runtime/actor-runtime.ts). A snapshot is a
// cache of the fold, never a source of truth: the events stay, time-travel and replay read them
// whole, and a snapshot that does not fit (another machine version, an event id that does not
// match the stream's) is ignored and rebuilt.
//
// Stored in Postgres (table baton_snapshots) whichever adapter holds the events: Baton always has
// its Postgres database for the read model, and a snapshot stream in EventStoreDB would show in
// every read of $all (exports, copies).
import type pg from 'pg';
import type { StoredEvent } from './event-store.ts';

export interface StoredSnapshot {
  streamId: string;
  /** Revision of the last event folded into `state`. */
  revision: bigint;
  /** Id of the event at `revision`: a load checks it, so a snapshot of a different stream of the same name is never used. */
  eventId: string;
  /** The machine version whose persisted form `state` is (an actor kind's machineVersion). */
  machineVersion: string;
  /** The machine's persisted snapshot (plain JSON). */
  state: unknown;
}

export interface SnapshotStore {
  read(streamId: string): Promise<StoredSnapshot | undefined>;
  /** Keep `snapshot` unless the one stored is at a later revision of the same machine version (one at the same revision is replaced: it may name another event). */
  write(snapshot: StoredSnapshot): Promise<void>;
  /** Forget the snapshots of these streams (their events were removed). */
  delete(streamIds: readonly string[], client?: pg.ClientBase): Promise<void>;
  /**
   * The stream's snapshot of `machineVersion` and the events from its revision on (the
   * snapshot's own event first), or every event when there is none: one round trip where the
   * snapshots live beside the events (Postgres). Absent: read the snapshot, then the stream.
   */
  readWithEvents?(streamId: string, machineVersion: string): Promise<{ snapshot: StoredSnapshot | undefined; events: StoredEvent[] }>;
}

interface SnapshotRow {
  revision: string;
  event_id: string;
  machine_version: string;
  state: unknown;
}

interface EventWithSnapshotRow {
  global_position: string;
  event_id: string;
  revision: string;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  recorded_at: Date;
  snapshot_revision: string | null;
  snapshot_event_id: string | null;
  snapshot_state: unknown;
}

/**
 * `events`: the Postgres event store is in the same database, so a load reads the snapshot and
 * the events after it in one statement (otherwise every load of a short stream would pay a
 * round trip to find that there is no snapshot).
 */
export function createPostgresSnapshotStore(pool: pg.Pool, o: { events?: boolean } = {}): SnapshotStore {
  async function readWithEvents(streamId: string, machineVersion: string) {
    const r = await pool.query<EventWithSnapshotRow>({
      name: 'baton_read_stream_from_snapshot',
      // The bound as a scalar subquery (an InitPlan): the index range starts at the snapshot.
      // As a join column it made Postgres read the whole stream's index and filter.
      text: `WITH s AS (SELECT revision, event_id, state FROM baton_snapshots WHERE stream_id = $1 AND machine_version = $2)
             SELECT e.global_position, e.event_id, e.revision, e.type, e.data, e.metadata, e.recorded_at,
                    s.revision AS snapshot_revision, s.event_id AS snapshot_event_id,
                    CASE WHEN e.revision = s.revision THEN s.state END AS snapshot_state
             FROM baton_events e LEFT JOIN s ON true
             WHERE e.stream_id = $1 AND e.revision >= coalesce((SELECT revision FROM s), 0)
             ORDER BY e.revision`,
      values: [streamId, machineVersion],
    });
    const first = r.rows[0];
    const snapshot: StoredSnapshot | undefined =
      first?.snapshot_revision != null && first.snapshot_event_id != null
        ? { streamId, revision: BigInt(first.snapshot_revision), eventId: first.snapshot_event_id, machineVersion, state: first.snapshot_state }
        : undefined;
    const events = r.rows.map((row): StoredEvent => ({
      eventId: row.event_id,
      streamId,
      revision: BigInt(row.revision),
      globalPosition: BigInt(row.global_position),
      type: row.type,
      data: row.data,
      metadata: row.metadata,
      recordedAt: row.recorded_at,
    }));
    return { snapshot, events };
  }
  return {
    ...(o.events && { readWithEvents }),
    async read(streamId) {
      const r = await pool.query<SnapshotRow>({
        name: 'baton_read_snapshot',
        text: 'SELECT revision, event_id, machine_version, state FROM baton_snapshots WHERE stream_id = $1',
        values: [streamId],
      });
      const row = r.rows[0];
      return row && { streamId, revision: BigInt(row.revision), eventId: row.event_id, machineVersion: row.machine_version, state: row.state };
    },
    async write(s) {
      await pool.query({
        name: 'baton_write_snapshot',
        text: `INSERT INTO baton_snapshots AS s (stream_id, revision, event_id, machine_version, state) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision, event_id = excluded.event_id,
                 machine_version = excluded.machine_version, state = excluded.state, written_at = now()
               WHERE s.revision <= excluded.revision OR s.machine_version <> excluded.machine_version`,
        values: [s.streamId, s.revision.toString(), s.eventId, s.machineVersion, JSON.stringify(s.state)],
      });
    },
    async delete(streamIds, client) {
      if (streamIds.length === 0) return;
      await (client ?? pool).query('DELETE FROM baton_snapshots WHERE stream_id = ANY($1::text[])', [[...streamIds]]);
    },
  };
}
