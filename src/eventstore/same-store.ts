// Whether two Postgres URLs reach one event store, asked of the servers: comparing the URLs' text
// let `…/qa_a` and `…/qa_a?x=1` (or localhost for 127.0.0.1, a second address, a pooler) copy a
// store onto itself. What a non-superuser on managed Postgres can do, writing nothing: the first
// connection takes a session advisory lock on a random key, and the second cannot take it only
// when it is in the same database (advisory locks are per database, across the whole server).
// In one database, two schemas are two installations: the same baton_events table (by oid,
// under each URL's search_path) is the same store.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DatabaseUnavailableError, redactUrl } from '../db/connect.ts';

export interface SameStoreAnswer {
  same: boolean;
  /** The database both reach, when they are one store. */
  database?: string;
}

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: 'baton-copy-check', connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined); // a connection lost while ended: the query in flight says so
  try {
    await client.connect();
  } catch (err) {
    throw new DatabaseUnavailableError(`cannot connect to Postgres at ${redactUrl(url)}: ${(err as Error).message}`, { cause: err });
  }
  return client;
}

export async function samePostgresStore(a: string, b: string): Promise<SameStoreAnswer> {
  const key = randomBytes(8).readBigInt64BE().toString();
  const clients: pg.Client[] = [];
  try {
    clients.push(await connect(a));
    clients.push(await connect(b));
    const ask = (c: pg.Client) =>
      c.query<{ got: boolean; events: string | null; db: string }>("SELECT pg_try_advisory_lock($1::bigint) AS got, to_regclass('baton_events')::oid::text AS events, current_database() AS db", [key]);
    const first = (await ask(clients[0]!)).rows[0]!;
    const second = (await ask(clients[1]!)).rows[0]!;
    // The second could not take the lock the first holds: one database.
    const same = first.got && !second.got && first.events !== null && first.events === second.events;
    return same ? { same, database: first.db } : { same };
  } finally {
    // Ending a session releases its advisory locks.
    await Promise.allSettled(clients.map((c) => c.end()));
  }
}
