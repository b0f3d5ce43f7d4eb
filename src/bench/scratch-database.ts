// Benchmarks run on a scratch database created beside the configured one and dropped
// afterwards, so a bench never touches real data.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrateAll } from '../db/all-migrations.ts';
import { onInterrupt } from './interrupt.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';

export async function withScratchDatabase<T>(
  admin: { pool: pg.Pool; databaseUrl: string },
  poolSize: number,
  fn: (scratch: { pool: pg.Pool; url: string; postgresVersion: string }) => Promise<T>,
): Promise<T> {
  const name = `baton_bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const url = new URL(admin.databaseUrl);
  url.pathname = `/${name}`;
  const postgresVersion = (await admin.pool.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  const drop = () => admin.pool.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  // Registered before CREATE DATABASE (~0.1 s): a Ctrl-C during it waits for it, then drops what it made.
  const creating = admin.pool.query(`CREATE DATABASE ${name}`);
  const dropIfInterrupted = onInterrupt(async () => {
    await creating.catch(() => undefined);
    await drop();
  });
  await creating.catch((err: unknown) => {
    dropIfInterrupted();
    throw err;
  });
  const pool = new pg.Pool({ connectionString: url.toString(), max: poolSize, ...KEEP_IDLE_CONNECTIONS });
  pool.on('error', () => undefined); // idle clients dropped by DROP DATABASE … FORCE
  try {
    await migrateAll(pool);
    return await fn({ pool, url: url.toString(), postgresVersion });
  } finally {
    await pool.end();
    await drop();
    dropIfInterrupted();
  }
}
