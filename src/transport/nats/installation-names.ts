// The names one installation's NATS work transport uses on a server it may share with others: its
// stream, subjects and (inside the stream) its workers' consumers. They derive from the
// installation's id in its database (transport migration 0004), so every process of one
// installation agrees on them and two installations never meet: `BATON_WORK_<token>` on subjects
// `baton.<token>.…`. The token is 12 hex digits of a random UUID; the subjects avoid `baton.work.…`,
// which an installation of an earlier version still holds with its stream BATON_WORK.
import type pg from 'pg';
import type { NatsWorkTransportOptions } from './context.ts';

// A database copied under another name (a template, a restored dump) is another installation: the
// first process to ask gives it an id of its own. Two statements, not one: concurrent askers (an
// executor and a worker started together on a restored copy) block on the row, and the loser's
// UPDATE finds nothing left to change, but a read in that same statement would still see the
// copy's old id from the statement's snapshot, and that process would use another stream than
// its peers. The SELECT runs after the winner committed, with a fresh snapshot.
const TAKE_INSTALLATION_ID = `
  UPDATE baton_installation SET id = gen_random_uuid(), database_name = current_database()
  WHERE database_name IS DISTINCT FROM current_database()`;
const INSTALLATION_ID = 'SELECT id::text AS id FROM baton_installation';

export async function natsNamesOf(pool: pg.Pool): Promise<Required<Pick<NatsWorkTransportOptions, 'streamName' | 'subjectPrefix'>>> {
  await pool.query(TAKE_INSTALLATION_ID);
  const { rows } = await pool.query<{ id: string }>(INSTALLATION_ID);
  if (!rows[0]) throw new Error('baton_installation has no row: the database was not migrated (run any baton command against it)');
  return natsNamesOfInstallation(rows[0].id);
}

/** The names of the installation whose id (baton_installation) is `id`. */
export function natsNamesOfInstallation(id: string): Required<Pick<NatsWorkTransportOptions, 'streamName' | 'subjectPrefix'>> {
  const token = id.replace(/-/g, '').slice(0, 12);
  return { streamName: `BATON_WORK_${token}`, subjectPrefix: `baton.${token}` };
}
