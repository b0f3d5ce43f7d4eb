// Scratch schemas of `projections verify` (baton_verify_<hex>) and of rebuilds (<prefix>_rebuild_<name>):
// each is held, for as long as it is in use, by a session advisory lock named after it. A run that
// died (killed, Ctrl-C, the connection lost) leaves its schema with nobody holding that lock, so a
// later run can tell a leftover from a schema another process is using right now, and drop it.
import pg from 'pg';
import type { Logger } from 'pino';
import { projections as allProjections } from '../../projections/index.ts';
import { dbSchemaOf } from '../db/db-schema.ts';
import { holdSession } from '../db/held-session.ts';

const lockKey = 'hashtextextended($1, 0)';

/** The aside schema a rebuild of `projection` uses on this pool's installation. */
export const rebuildSchemaOf = (pool: pg.Pool, projection: string): string => `${dbSchemaOf(pool) ?? 'baton'}_rebuild_${projection}`;

/** Scratch schemas of this installation's runs (verify's are per database), in use or not. */
async function scratchSchemas(pool: pg.Pool): Promise<string[]> {
  const asides = allProjections.map((p) => rebuildSchemaOf(pool, p.name));
  const r = await pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname ~ '^baton_verify_[0-9a-f]{8}$' OR nspname = ANY($1::text[]) ORDER BY 1`, [asides]);
  return r.rows.map((row) => row.nspname);
}

/** Schemas in use by this process now, for an interrupt to clean up (interruptCleanup). */
const inUse = new Set<string>();

/** A rebuild's aside schema, held under its own lock (rebuild.ts): for an interrupt to clean up. */
export function trackScratch(name: string): () => void {
  inUse.add(name);
  return () => inUse.delete(name);
}

export interface HeldScratch {
  readonly name: string;
  /** Drop the schema and free its lock. */
  release(): Promise<void>;
}

/** Create schema `name` and hold its lock (a dedicated session) until release(). */
export async function holdScratchSchema(pool: pg.Pool, name: string): Promise<HeldScratch> {
  const client = await holdSession(pool);
  try {
    await client.query(`SELECT pg_advisory_lock(${lockKey})`, [name]);
    await client.query(`CREATE SCHEMA ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    client.release(true);
    throw err;
  }
  inUse.add(name);
  return {
    name,
    async release() {
      try {
        await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(name)} CASCADE`);
        inUse.delete(name);
      } finally {
        client.release(true); // the lock goes with the session
      }
    },
  };
}

/**
 * Scratch schemas nobody holds: left by a run that died. `drop`: remove them (each under its lock,
 * so a run starting at that moment waits, then starts afresh). Returns the ones found.
 */
export async function leftoverScratchSchemas(pool: pg.Pool, o: { drop: boolean; log?: Logger }): Promise<string[]> {
  const names = await scratchSchemas(pool);
  if (names.length === 0) return [];
  const client = await holdSession(pool);
  const left: string[] = [];
  try {
    for (const name of names) {
      const r = await client.query<{ got: boolean }>(`SELECT pg_try_advisory_lock(${lockKey}) AS got`, [name]);
      if (!r.rows[0]!.got) continue; // a live run's
      try {
        if (o.drop) {
          await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(name)} CASCADE`);
          o.log?.info({ schema: name }, 'dropped a scratch schema left by an interrupted verify or rebuild');
        }
        left.push(name);
      } finally {
        await client.query(`SELECT pg_advisory_unlock(${lockKey})`, [name]);
      }
    }
  } finally {
    client.release();
  }
  return left;
}

/**
 * On Ctrl-C: end this process's sessions on its scratch schemas and drop them, with a fresh
 * session (the pool's are busy). Returns what was dropped and what is left for the next run's sweep.
 */
export async function interruptCleanup(connectionString: string | undefined): Promise<{ dropped: string[]; left: string[] }> {
  const names = [...inUse];
  const dropped: string[] = [];
  if (names.length === 0) return { dropped, left: [] };
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 3_000 });
  client.on('error', () => undefined); // a lost connection: the query in flight says so
  try {
    await client.connect();
    await client.query(`SET lock_timeout = '3s'`);
    for (const name of names) {
      // Only our own sessions touch this schema (its lock is ours), and we are exiting: end them
      // (a cancel misses a transaction idle between two statements, whose locks stay), then drop it.
      await client.query(
        // Locks on its tables, or on the schema itself (taken by a CREATE in it not yet committed,
        // whose new tables no other session can see).
        `SELECT pg_terminate_backend(pid) FROM (SELECT DISTINCT l.pid FROM pg_locks l
          WHERE l.pid <> pg_backend_pid()
            AND (l.relation IN (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1)
              OR (l.locktype = 'object' AND l.classid = 'pg_namespace'::regclass AND l.objid = (SELECT oid FROM pg_namespace WHERE nspname = $1)))) p`,
        [name],
      );
      await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(name)} CASCADE`).then(
        () => dropped.push(name),
        () => undefined,
      );
    }
  } catch {
    // The database away: the next run sweeps them (their locks die with this process).
  } finally {
    await client.end().catch(() => undefined);
  }
  return { dropped, left: names.filter((n) => !dropped.includes(n)) };
}
