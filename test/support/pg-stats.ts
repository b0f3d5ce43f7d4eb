import type pg from 'pg';

type Queryable = Pick<pg.Pool | pg.ClientBase, 'query'>;

/**
 * A count from Postgres's statistics views (`sql` returns one row with a column `n`), once the
 * counters of the connection under test (`measured`, a one-connection pool or a client) have
 * reached them. A backend sends its counters at most once a second, and after
 * pg_stat_force_next_flush() when it next goes idle: so one more statement on it returns only
 * after they are sent. Read through `reader`, another connection.
 */
export async function flushedStat(measured: Queryable, reader: Queryable, sql: string, params: unknown[] = []): Promise<number> {
  await measured.query('SELECT pg_stat_force_next_flush()');
  await measured.query('SELECT 1');
  const r = await reader.query<{ n: string }>(sql, params);
  return Number(r.rows[0]!.n);
}
