// A pool client held across other work (a session advisory lock for a whole rebuild or retention
// run). A connection lost while it sits between queries is an 'error' event on the client, which
// pg-pool listens for only on idle clients: with no listener it was an uncaught exception that
// ended the process (seen in CI: a test ending the database's sessions during a projector's
// rebuild). The next query on it fails instead, and whoever holds it handles that.
import type pg from 'pg';

export async function holdSession(pool: pg.Pool): Promise<pg.PoolClient> {
  const client = await pool.connect();
  const lost = () => undefined;
  client.on('error', lost);
  const release = client.release.bind(client);
  client.release = (err?: Error | boolean) => {
    client.off('error', lost);
    release(err);
  };
  return client;
}
