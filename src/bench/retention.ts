// `baton bench retention`: how fast `baton retention run` archives and removes finished work.
// Appends N complete execution histories (completedHistory) to a scratch database, projects them,
// then runs retention over all of them (archive files in a temporary directory, removed after).
import { mkdtemp, rm } from 'node:fs/promises';
import { onInterrupt } from './interrupt.ts';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { createPostgresEventStore } from '../eventstore/postgres.ts';
import { table } from '../cli/format.ts';
import { catchUpReadModel } from '../readmodel/group-follow.ts';
import { runRetention } from '../retention/retention.ts';
import { appendHistories, COMPLETED_HISTORY_EVENTS } from './projections.ts';
import { withScratchDatabase } from './scratch-database.ts';

export interface RetentionBenchResult {
  postgres: string;
  executions: number;
  events: number;
  seconds: number;
  executionsPerSec: number;
  eventsPerSec: number;
  eventsLeft: number;
}

export async function runRetentionBench(admin: { pool: pg.Pool; databaseUrl: string }, o: { executions: number; progress: (line: string) => void }): Promise<RetentionBenchResult> {
  const archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-bench-archive-'));
  const removeArchive = () => rm(archiveDir, { recursive: true, force: true });
  const removeIfInterrupted = onInterrupt('archive files', removeArchive); // its archive files are the bench's own, as its database is
  try {
    return await withScratchDatabase(admin, 8, async ({ pool, postgresVersion }) => {
      const store = createPostgresEventStore(pool);
      try {
        o.progress(`[1/3] appending ${o.executions.toLocaleString('en')} execution histories (${COMPLETED_HISTORY_EVENTS} events each) …`);
        await appendHistories(store, o.executions);
        o.progress('[2/3] projecting them …');
        await catchUpReadModel({ pool, store });
        o.progress('[3/3] archiving and removing them all …');
        // An hour ahead: everything just written is older than the smallest age.
        const s = await runRetention({ pool, store, olderThanMs: 60_000, archiveDir, now: () => new Date(Date.now() + 3_600_000) });
        const left = await pool.query<{ n: string }>('SELECT count(*) AS n FROM baton_events');
        const seconds = s.ms / 1000;
        return {
          postgres: postgresVersion,
          executions: s.executions,
          events: s.events,
          seconds: Number(seconds.toFixed(2)),
          executionsPerSec: Math.round(s.executions / seconds),
          eventsPerSec: Math.round(s.events / seconds),
          eventsLeft: Number(left.rows[0]!.n),
        };
      } finally {
        await store.close();
      }
    });
  } finally {
    await removeArchive();
    removeIfInterrupted();
  }
}

export function printRetentionBench(r: RetentionBenchResult): string {
  return [
    `retention run over ${r.executions.toLocaleString('en')} finished executions (PostgreSQL ${r.postgres}): read, checked, archived (fsynced) and removed`,
    table(['EXECUTIONS', 'EVENTS', 'SECONDS', 'EXECUTIONS/S', 'EVENTS/S', 'EVENTS LEFT'], [[r.executions.toLocaleString('en'), r.events.toLocaleString('en'), String(r.seconds), r.executionsPerSec.toLocaleString('en'), r.eventsPerSec.toLocaleString('en'), String(r.eventsLeft)]]),
  ].join('\n');
}
