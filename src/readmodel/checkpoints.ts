// Projection checkpoints (table baton_projection_checkpoints, migration set `projections`).
import type pg from 'pg';
import { BatonError } from '../errors.ts';

export interface Checkpoint {
  projection: string;
  position: bigint;
  version: number;
  eventsApplied: bigint;
  lastRecordedAt: Date | null;
}

export async function readCheckpoint(db: pg.Pool | pg.ClientBase, projection: string, options: { lock?: boolean } = {}): Promise<Checkpoint> {
  const r = await db.query<{ position: string; version: number; events_applied: string; last_recorded_at: Date | null }>(
    `SELECT position, version, events_applied, last_recorded_at FROM baton_projection_checkpoints WHERE projection = $1${options.lock ? ' FOR UPDATE' : ''}`,
    [projection],
  );
  const row = r.rows[0];
  if (!row) throw new BatonError(`projection "${projection}" has no checkpoint row: run the migrations (any baton command does)`);
  return {
    projection,
    position: BigInt(row.position),
    version: row.version,
    eventsApplied: BigInt(row.events_applied),
    lastRecordedAt: row.last_recorded_at,
  };
}

export async function readCheckpoints(db: pg.Pool | pg.ClientBase): Promise<Checkpoint[]> {
  const r = await db.query<{ projection: string }>('SELECT projection FROM baton_projection_checkpoints ORDER BY projection');
  return Promise.all(r.rows.map((row) => readCheckpoint(db, row.projection)));
}

/**
 * Move a checkpoint from `expected` to `next`, only if it is still at `expected` and still at the
 * projection's version. The row lock taken here is held until the caller's transaction ends, so a
 * concurrent mover waits and then finds the position changed. False: someone else moved it, or
 * swapped in another version (a newer projector's rebuild): roll back. Checking the version here
 * costs the batch nothing (the same UPDATE), and a running follower so notices a swap at once.
 * A null lastRecordedAt (a group batch with none of this projection's events) keeps the one stored.
 */
export async function advanceCheckpoint(
  client: pg.ClientBase,
  projection: { name: string; version: number },
  expected: bigint,
  next: { position: bigint; events: number; lastRecordedAt: Date | null },
): Promise<boolean> {
  const r = await client.query(
    `UPDATE baton_projection_checkpoints
        SET position = $3, events_applied = events_applied + $4, last_recorded_at = COALESCE($5, last_recorded_at), updated_at = now()
      WHERE projection = $1 AND position = $2 AND version = $6`,
    [projection.name, expected.toString(), next.position.toString(), next.events, next.lastRecordedAt, projection.version],
  );
  return r.rowCount === 1;
}

/** A read model built by a newer Baton than this one: this build must leave it alone (never rebuild it down). */
export class NewerVersionError extends BatonError {
  constructor(
    readonly projection: string,
    readonly storedVersion: number,
    readonly codeVersion: number,
  ) {
    super(newerVersionMessage(projection, storedVersion, codeVersion));
    this.name = 'NewerVersionError';
  }
}

export const newerVersionMessage = (projection: string, stored: number, code: number, who = 'this build'): string =>
  `projection ${projection} is at version ${stored}, built by a newer Baton; ${who} (version ${code}) leaves it alone: upgrade it`;
