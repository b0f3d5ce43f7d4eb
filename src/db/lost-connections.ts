// A connection whose server went away emits 'error'. On an idle client pg-pool forwards it to
// the pool; on a checked-out one (between two queries of a transaction, or a held session)
// pg-pool listens for nothing, and with no listener the 'error' is an uncaught exception that
// ends the process. With this, either is `lost`'s to report; the pending or next query on that
// client fails, and its caller retries.
import type pg from 'pg';

export function onLostConnections(pool: pg.Pool, lost: (err: Error, where: 'idle' | 'checked out') => void): void {
  pool.on('error', (err) => lost(err, 'idle'));
  pool.on('connect', (client) => client.on('error', (err) => lost(err, 'checked out')));
}
