// `baton bench start`: how long an executor host takes to be ready, and how much memory it holds
// then, on a store with many finished executions and some in flight: following from position 0
// (every event ever stored) against starting from the read model's checkpoint plus the live
// executions (src/runtime/start-point.ts). Seeds a scratch database with appendMany (finished
// histories as completedHistory makes them, live ones of 1 event), projects it, then runs each
// start in a process of its own (start-probe.ts), so each figure is one host's.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type pg from 'pg';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { COMPLETED_HISTORY_EVENTS } from './projections.ts';
import { projectAll, seedExecutions } from './seed-history.ts';
import { withScratchDatabase } from './scratch-database.ts';
import type { StartProbeResult } from './start-probe.ts';

export interface StartBenchResult {
  postgres: string;
  finished: number;
  live: number;
  events: number;
  fromZero: StartProbeResult;
  fromCheckpoint: StartProbeResult;
}

async function probe(url: string, mode: 'checkpoint' | 'zero', verbose: boolean): Promise<StartProbeResult> {
  const fromSources = import.meta.url.endsWith('.ts');
  const script = fileURLToPath(new URL(`./start-probe${fromSources ? '.ts' : '.js'}`, import.meta.url));
  // From the sources (bin/baton.js runs them through tsx when dist/ is stale) the child needs tsx too.
  const loader = fromSources ? ['--import', import.meta.resolve('tsx')] : [];
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [...loader, '--expose-gc', script, url, mode, ...(verbose ? ['verbose'] : [])], { maxBuffer: 64 << 20, timeout: 30 * 60_000 });
  if (stderr.trim()) process.stderr.write(stderr);
  return JSON.parse(stdout.trim().split('\n').pop()!) as StartProbeResult;
}

export async function runStartBench(admin: { pool: pg.Pool; databaseUrl: string }, o: { finished: number; live: number; verbose?: boolean; progress: (line: string) => void }): Promise<StartBenchResult> {
  return withScratchDatabase(admin, 8, async ({ pool, url, postgresVersion }) => {
    const store = createPostgresEventStore(pool);
    try {
      o.progress(`[1/4] appending ${o.finished.toLocaleString('en')} finished executions (${COMPLETED_HISTORY_EVENTS} events each) and ${o.live.toLocaleString('en')} in flight …`);
      await seedExecutions(store, { finished: o.finished, live: o.live, progress: o.progress });
      o.progress('[2/4] projecting them …');
      await projectAll(pool, store, o.progress);
      const events = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events')).rows[0]!.n);
      o.progress('[3/4] an executor host following from position 0 …');
      const fromZero = await probe(url, 'zero', o.verbose ?? false);
      o.progress('[4/4] an executor host starting from the checkpoint …');
      const fromCheckpoint = await probe(url, 'checkpoint', o.verbose ?? false);
      return { postgres: postgresVersion, finished: o.finished, live: o.live, events, fromZero, fromCheckpoint };
    } finally {
      await store.close();
    }
  });
}

export function printStartBench(r: StartBenchResult): string {
  const row = (name: string, p: StartProbeResult) =>
    `  ${name.padEnd(16)} ready ${(p.readyMs / 1000).toFixed(2).padStart(7)} s   RSS ${String(p.rssMb).padStart(5)} MB (${String(p.rssAfterGcMb).padStart(4)} MB after GC)   heap ${String(p.heapUsedMb).padStart(4)} MB (${p.heapUsedAfterGcMb} after GC)   waiting ${p.waiting}`;
  return [
    `executor host start on ${r.events.toLocaleString('en')} events: ${r.finished.toLocaleString('en')} finished executions, ${r.live.toLocaleString('en')} in flight (PostgreSQL ${r.postgres})`,
    row('from position 0', r.fromZero),
    row('from checkpoint', r.fromCheckpoint),
  ].join('\n');
}
