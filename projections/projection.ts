// What a projection is: a pure fold from events to rows (its own module's functions), its
// tables, and how to apply a batch of events to those tables inside the projector's
// transaction. The projector (src/readmodel/projector.ts) owns checkpoints, batching,
// rebuilds and verification; a projection never touches those.
import type pg from 'pg';
import type { StoredEvent } from '../src/eventstore/event-store.ts';

export interface ProjectionTable {
  name: string;
  /** Primary key columns: verify names differing rows by these. */
  key: readonly string[];
}

export interface BatchResult {
  /** Executions whose row changed (the API pushes these to `executionUpdated` subscribers). */
  changedExecutions: string[];
  /** Events the machine refused, each with why (logged and counted; normally none). */
  refused: { streamId: string; revision: bigint; reason: string }[];
}

/**
 * Where the batch's events are stored, when that is a table of the database the projection writes
 * to (the Postgres event store): a projection may then copy from it in SQL instead of shipping the
 * events back through the process. Absent for other stores (EventStoreDB).
 */
export interface EventSource {
  /** The events table as the caller's connection names it (its search_path). */
  eventsTable: string;
}

/**
 * What a projection may keep from one batch to the next of the same follow (src/readmodel/
 * group-follow.ts): what it wrote, so the next batch need not read it back. The follow makes it
 * and drops it whenever that could be stale: when another writer moved the checkpoint, when a
 * batch failed (its transaction rolled back), and when the follow ends. Without one (a rebuild,
 * a test), a projection reads what it needs.
 */
export type BatchMemory = Map<string, unknown>;

export interface Projection {
  /** Checkpoint key and the name `baton projections rebuild <name>` takes. Never rename. */
  readonly name: string;
  /** Bump when the fold or the tables change: the projector then rebuilds aside and swaps. */
  readonly version: number;
  readonly streamPrefixes: readonly string[];
  readonly tables: readonly ProjectionTable[];
  /** CREATE statements with unqualified names; run with search_path at the target schema. */
  readonly ddl: URL;
  /**
   * For a projection of one table that only maps events to rows: the SELECT over the events table
   * (named as the caller's connection names it) that gives that table's rows. Where the events
   * share the read model's database (an EventSource), the table is then this view and keeps no
   * rows of its own, and apply is given that source and writes nothing (src/readmodel/tables.ts).
   */
  readonly storeView?: (eventsTable: string) => string;
  /** Apply a batch (in commit order) to the tables in `schema`, inside the caller's transaction. */
  apply(client: pg.ClientBase, schema: string, events: readonly StoredEvent[], source?: EventSource, memory?: BatchMemory): Promise<BatchResult>;
}

/** The events of a batch that a projection follows (the store matches prefixes the same way). */
export const eventsOf = (p: Projection, events: readonly StoredEvent[]): StoredEvent[] =>
  events.filter((e) => p.streamPrefixes.some((prefix) => e.streamId.startsWith(prefix)));
