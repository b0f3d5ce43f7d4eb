// Benchmarks run on a scratch database created beside the configured one and dropped
// afterwards, so a bench never touches real data.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrateAll } from '../db/all-migrations.ts';
import { BatonError } from '../errors.ts';
import { onInterrupt } from './interrupt.ts';
import { KEEP_IDLE_CONNECTIONS } from '../db/pool-settings.ts';

export async function withScratchDatabase<T>(
  admin: { pool: pg.Pool; databaseUrl: string },
  poolSize: number,
  fn: (scratch: { pool: pg.Pool; url: string; postgresVersion: string }) => Promise<T>,
  /** The option that sized the pool (`--streams 256`): a size the server can never give is refused naming it. */
  sizedBy?: string,
): Promise<T> {
  const name = `baton_bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const url = new URL(admin.databaseUrl);
  url.pathname = `/${name}`;
  const settings = await admin.pool.query<{ v: string; max: string; reserved: string }>(
    "SELECT current_setting('server_version') AS v, current_setting('max_connections') AS max, current_setting('superuser_reserved_connections') AS reserved",
  );
  const { v: postgresVersion, max, reserved } = settings.rows[0]!;
  // Only what can never fit, even on an idle server: whether the connections free now suffice is
  // the server's to say, and a pool opens its connections only as they are needed.
  const allowed = Number(max) - Number(reserved);
  if (sizedBy && poolSize > allowed) {
    throw new BatonError(`${sizedBy} needs ${poolSize} connections to Postgres at once; this server allows ${allowed} (max_connections ${max}, less ${reserved} for superusers): give a smaller ${sizedBy.split(' ')[0]}`);
  }
  const drop = () => admin.pool.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  // Registered before CREATE DATABASE (~0.1 s): a Ctrl-C during it waits for it, then drops what it made.
  const creating = admin.pool.query(`CREATE DATABASE ${name}`);
  const dropIfInterrupted = onInterrupt('scratch database', async () => {
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
