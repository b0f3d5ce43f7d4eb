// What `baton verify` does (its options are defined in verify-command.ts): check DESIGN.md's
// invariants over every execution in the event store, and that the read model equals a rebuild.
import { executionIdOfStream, executionStreamId } from '../../../schemas/events.ts';
import fs from 'node:fs/promises';
import type pg from 'pg';
import type { EventStore } from '../../eventstore/event-store.ts';
import { BatonError } from '../../errors.ts';
import { executionId } from '../arguments.ts';
import { checkInvariants, describeReport, type CheckProgress } from '../../verify/invariants.ts';
import { readContext } from '../context.ts';
import { cleanUpOnInterrupt } from './projections.ts';
import { toJson } from '../format.ts';
import { archivedStreamIds } from '../../retention/store-side.ts';
import { progressLine, type Progress } from '../progress.ts';

/** One execution id a line; blank lines and `#` comments are skipped. */
async function readExpectedIds(file: string): Promise<string[]> {
  const text = await fs.readFile(file, 'utf8').catch((err: unknown) => {
    throw new BatonError(`--expect: cannot read ${file}: ${(err as Error).message}`, { cause: err });
  });
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  // The rule every command's <id> takes (either case, or the `execution-<uuid>` stream id), stored
  // in lower case: compared as written, `01A2…` was reported lost though its stream is there.
  const ids: string[] = [];
  const bad: string[] = [];
  for (const line of lines) {
    try {
      ids.push(executionId(line));
    } catch {
      bad.push(line);
    }
  }
  if (bad.length > 0) throw new BatonError(`--expect: ${file} holds ${bad.length} line(s) that are not execution ids, first: "${bad[0]!.slice(0, 80)}"`);
  return [...new Set(ids)];
}

export async function verifyCommand(o: { json?: boolean; readModel: boolean; requireTerminal?: boolean; stuckAfter: number; expect?: string }): Promise<void> {
  const expected = o.expect ? await readExpectedIds(o.expect) : undefined;
  await readContext(async ({ pool, store, databaseUrl }) => {
    // Ctrl-C while the read model is rebuilt aside drops that scratch schema and says so.
    const uninstall = o.readModel ? cleanUpOnInterrupt(databaseUrl) : () => undefined;
    try {
      await verifyWith(pool, store, o, expected);
    } finally {
      uninstall();
    }
  });
}

async function verifyWith(pool: pg.Pool, store: EventStore, o: Parameters<typeof verifyCommand>[0], expected: string[] | undefined): Promise<void> {
  // Expected ids that retention archived are not lost: their histories are in the archive.
  const archived = expected ? await archivedExecutionIds(pool, expected) : new Set<string>();
  if (archived.size > 0) process.stderr.write(`verify: ${archived.size} expected execution(s) were archived by retention (not lost)\n`);
  let scanned = 0;
  let line: { phase: CheckProgress['phase']; progress: Progress } | undefined;
  const lineFor = (phase: CheckProgress['phase']) => {
    if (line?.phase !== phase) {
      const labels = { scan: 'scanning the event log', streams: 'checking executions', 'read-model': 'rebuilding the read model to compare' };
      line = { phase, progress: progressLine(labels[phase], phase === 'streams' ? scanned : undefined) };
    }
    return line.progress;
  };
  const report = await checkInvariants(store, {
    ...(expected && { expectedExecutionIds: [...expected].filter((id) => !archived.has(id)) }),
    requireTerminal: o.requireTerminal ?? false,
    stuckAfterMs: o.stuckAfter,
    ...(o.readModel && { pool }),
    // EventStoreDB keeps deleted streams in $all until a scavenge: the archived ones are not lost.
    ...(store.deletedStreamsStayInReadAll && { archivedStreams: await archivedStreamIds(pool) }),
    onProgress: (p) => {
      if (p.phase === 'scan') scanned = p.done;
      lineFor(p.phase).update(p.phase === 'streams' ? (p.events ?? 0) : p.done);
    },
  });
  line?.progress.finish('done');
  process.stderr.write(`verify: ${report.ok ? 'every invariant holds' : 'PROBLEMS FOUND'}\n`);
  console.log(o.json ? toJson(report) : describeReport(report));
  if (!report.ok) process.exitCode = 1;
}

async function archivedExecutionIds(pool: import('pg').Pool, ids: Iterable<string>): Promise<Set<string>> {
  const streams = [...ids].map(executionStreamId);
  const r = await pool.query<{ stream_id: string }>('SELECT stream_id FROM baton_archived_streams WHERE stream_id = ANY($1::text[])', [streams]);
  return new Set(r.rows.map((row) => executionIdOfStream(row.stream_id)!));
}
