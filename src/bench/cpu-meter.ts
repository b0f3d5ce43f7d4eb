// CPU time spent by a bench phase: this process's, and the Postgres backends' serving the scratch
// database (read from /proc, so only when Postgres runs on this machine). On a machine shared
// with other load, appends/s mostly measures the share of CPU a phase gets; CPU per append
// measures what each append costs, which is what batching changes.
import { readFile } from 'node:fs/promises';
import type pg from 'pg';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

async function backendTicks(pool: pg.Pool): Promise<Map<number, number> | undefined> {
  const r = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const ticks = new Map<number, number>();
  for (const { pid } of r.rows) {
    try {
      const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      ticks.set(pid, Number(fields[11]) + Number(fields[12])); // utime + stime
    } catch {
      return undefined; // Postgres on another machine (or /proc hidden)
    }
  }
  return ticks;
}

export interface CpuReading {
  clientMs: number;
  /** Undefined when the server's processes cannot be read here. */
  serverMs: number | undefined;
}

export async function startCpuMeter(pool: pg.Pool): Promise<() => Promise<CpuReading>> {
  const client0 = process.cpuUsage();
  const server0 = await backendTicks(pool);
  return async () => {
    const client = process.cpuUsage(client0);
    const server1 = await backendTicks(pool);
    let serverMs: number | undefined;
    if (server0 && server1) {
      let ticks = 0;
      for (const [pid, t] of server1) ticks += t - (server0.get(pid) ?? 0);
      serverMs = (ticks * 1000) / TICKS_PER_SECOND;
    }
    return { clientMs: (client.user + client.system) / 1000, serverMs };
  };
}
