// The names one installation's NATS work transport uses on a server it may share with others: its
// stream, subjects and (inside the stream) its workers' consumers. They derive from the
// installation's id in its database (transport migration 0004), so every process of one
// installation agrees on them and two installations never meet: `BATON_WORK_<token>` on subjects
// `baton.<token>.…`. The token is 12 hex digits of a random UUID; the subjects avoid `baton.work.…`,
// which an installation of an earlier version still holds with its stream BATON_WORK.
import fs from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import type { NatsWorkTransportOptions } from './context.ts';

// A database copied under another name (a template, a restored dump) is another installation: the
// first process to ask gives it an id of its own. On the embedded default every database is named
// `baton`, so there the cluster's directory tells copies apart too (transport migration 0005): a
// copied or moved data dir takes a new id. The directory comes from Baton, which runs the server,
// not from the server (`data_directory` needs privileges a managed database's user lacks); on
// BATON_DATABASE_URL ($1 NULL) only the database name counts, so a library process that reaches an
// embedded server by its URL does not re-key it. Two statements, not one: concurrent askers (an
// executor and a worker started together on a restored copy) block on the row, and the loser's
// UPDATE finds nothing left to change, but a read in that same statement would still see the
// copy's old id from the statement's snapshot, and that process would use another stream than
// its peers. The SELECT runs after the winner committed, with a fresh snapshot.
const TAKE_INSTALLATION_ID = `
  UPDATE baton_installation SET id = gen_random_uuid(), database_name = current_database(), data_dir = $1::text
  WHERE database_name IS DISTINCT FROM current_database() OR ($1::text IS NOT NULL AND data_dir IS DISTINCT FROM $1::text)`;
const INSTALLATION_ID = 'SELECT id::text AS id FROM baton_installation';

/**
 * The NATS names of the installation `pool` belongs to. `embeddedClusterDir`: the embedded
 * Postgres's cluster directory (Database.embeddedClusterDir); undefined on BATON_DATABASE_URL.
 */
export async function natsNamesOf(pool: pg.Pool, embeddedClusterDir?: string): Promise<Required<Pick<NatsWorkTransportOptions, 'streamName' | 'subjectPrefix'>>> {
  // The real path: processes reaching one cluster through a symlinked path must agree.
  const dataDir = embeddedClusterDir === undefined ? null : await fs.realpath(embeddedClusterDir).catch(() => path.resolve(embeddedClusterDir));
  await pool.query(TAKE_INSTALLATION_ID, [dataDir]);
  const { rows } = await pool.query<{ id: string }>(INSTALLATION_ID);
  if (!rows[0]) throw new Error('baton_installation has no row: the database was not migrated (run any baton command against it)');
  return natsNamesOfInstallation(rows[0].id);
}

/** The names of the installation whose id (baton_installation) is `id`. */
export function natsNamesOfInstallation(id: string): Required<Pick<NatsWorkTransportOptions, 'streamName' | 'subjectPrefix'>> {
  const token = id.replace(/-/g, '').slice(0, 12);
  return { streamName: `BATON_WORK_${token}`, subjectPrefix: `baton.${token}` };
}
