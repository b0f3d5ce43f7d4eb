// Deleting a whole stream from the Postgres event store (retention, src/retention/): the port's
// deleteStream, and deleteStreamWithin for a caller that removes the read model's rows in the
// same transaction.
import type pg from 'pg';
import { WrongExpectedRevisionError } from '../errors.ts';

/**
 * One statement: removes the stream row (the compare-and-swap every append goes through, so an
 * append racing this one waits for it and then finds no stream), its events (keeping each one's
 * (position, transaction id) in baton_removed_positions, so a reader that checkpointed one of
 * them resumes where it was: pg-follow.ts) and its snapshot. The id may be used again
 * afterwards: a new stream of that name starts at revision 0. Autovacuum reclaims the space.
 */
export async function deleteStreamWithin(client: pg.ClientBase | pg.Pool, streamId: string, o: { expectedRevision: bigint }): Promise<{ deleted: number }> {
  const r = await client.query<{ streams: string; deleted: string }>({
    name: 'baton_delete_stream',
    text: `WITH s AS (DELETE FROM baton_streams WHERE stream_id = $1 AND revision = $2 RETURNING stream_id),
           gone AS (DELETE FROM baton_events e USING s WHERE e.stream_id = s.stream_id RETURNING e.global_position, e.transaction_id),
           kept AS (INSERT INTO baton_removed_positions (global_position, transaction_id) SELECT global_position, transaction_id FROM gone ON CONFLICT DO NOTHING),
           snap AS (DELETE FROM baton_snapshots WHERE stream_id IN (SELECT stream_id FROM s))
           SELECT (SELECT count(*) FROM s) AS streams, (SELECT count(*) FROM gone) AS deleted`,
    values: [streamId, o.expectedRevision.toString()],
  });
  if (r.rows[0]!.streams !== '0') return { deleted: Number(r.rows[0]!.deleted) };
  const now = await client.query<{ revision: string }>('SELECT revision FROM baton_streams WHERE stream_id = $1', [streamId]);
  if (now.rowCount === 0) return { deleted: 0 };
  throw new WrongExpectedRevisionError(streamId, o.expectedRevision, BigInt(now.rows[0]!.revision));
}
