// `baton projections verify`: rebuild every projection into a scratch schema up to exactly the
// live checkpoint, then compare the tables row by row. The live tables must be precisely what
// a fresh replay of the events gives.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { projections as allProjections, type Projection } from '../../projections/index.ts';
import { readModelSchemaOf } from '../db/db-schema.ts';
import { START, type EventStore } from '../eventstore/event-store.ts';
import { buildInto, type BuildProgress } from './build.ts';
import { readCheckpoint } from './checkpoints.ts';
import { eventSourceOf } from './event-source.ts';
import { holdScratchSchema, leftoverScratchSchemas } from './scratch.ts';
import { createProjectionTables, inTransaction, liveFormOf } from './tables.ts';

export interface TableDifference {
  projection: string;
  table: string;
  /** Keys of rows in the live table that the rebuild does not have at all. */
  extra: string[];
  /** Keys of rows the rebuild has and the live table lacks. */
  missing: string[];
  /** Keys of rows both have, with different values. */
  differing: string[];
  /** For the first few differing keys: the columns that differ. */
  columns: Record<string, string[]>;
}

/** How far the live checkpoint is behind the store: events of the projection's streams it has not applied yet. */
export interface Behind {
  events: number;
  /** When the oldest of them was stored. */
  oldestAt: string;
  seconds: number;
}

export interface VerifyReport {
  ok: boolean;
  projections: { projection: string; position: string; events: number; rows: Record<string, number>; problem?: string; behind?: Behind; newer?: boolean }[];
  differences: TableDifference[];
}

const MAX_KEYS_REPORTED = 50;
const MAX_KEYS_DETAILED = 5;
/**
 * A read model behind the store is not wrong (it equals a rebuild up to its checkpoint), but one
 * whose oldest unapplied event is older than this (BatonProjectionLagging's threshold) is not being
 * kept current: no projector running, or one stuck. That fails verify.
 */
export const BEHIND_FAILS_AFTER_S = 60;

/** Events of `p`'s streams after `position`, counted page by page (the store has no cheap count everywhere). */
async function behindOf(store: EventStore, p: Projection, position: bigint): Promise<Behind | undefined> {
  let after = position;
  let events = 0;
  let oldest: Date | undefined;
  for (;;) {
    const page = await store.readAll({ after, limit: 5_000, streamPrefixes: [...p.streamPrefixes] });
    if (page.length === 0) break;
    oldest ??= page[0]!.recordedAt;
    events += page.length;
    after = page[page.length - 1]!.globalPosition;
    if (page.length < 5_000) break;
  }
  return oldest && { events, oldestAt: oldest.toISOString(), seconds: Math.max(0, (Date.now() - oldest.getTime()) / 1000) };
}

/** The columns in which the live and the rebuilt row of each key differ. */
async function differingColumns(client: pg.ClientBase, table: Projection['tables'][number], live: string, rebuilt: string, scratch: string, keys: string[]): Promise<Record<string, string[]>> {
  if (keys.length === 0) return {};
  const cols = (await client.query<{ c: string }>('SELECT column_name AS c FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position', [scratch, table.name])).rows.map((r) => r.c);
  const keyOf = (alias: string) => table.key.map((k) => `${alias}.${pg.escapeIdentifier(k)}`).join(` || '/' || `);
  // As text: json has no equality, and text is what a reader would compare by eye.
  const diff = cols.map((c) => `CASE WHEN l.${pg.escapeIdentifier(c)}::text IS DISTINCT FROM r.${pg.escapeIdentifier(c)}::text THEN ${pg.escapeLiteral(c)} END`).join(', ');
  const r = await client.query<{ k: string; cols: (string | null)[] }>(
    `SELECT (${keyOf('l')})::text AS k, ARRAY[${diff}]::text[] AS cols FROM ${live} l JOIN ${rebuilt} r ON (${keyOf('l')})::text = (${keyOf('r')})::text WHERE (${keyOf('l')})::text = ANY($1::text[])`,
    [keys],
  );
  return Object.fromEntries(r.rows.map((row) => [row.k, row.cols.filter((c): c is string => c !== null)]));
}

async function compareTable(client: pg.ClientBase, p: Projection, table: Projection['tables'][number], scratch: string, liveSchema: string, position: bigint, view: boolean): Promise<{ diff: TableDifference; rows: number }> {
  const live = `${pg.escapeIdentifier(liveSchema)}.${pg.escapeIdentifier(table.name)}`;
  const rebuilt = `${pg.escapeIdentifier(scratch)}.${pg.escapeIdentifier(table.name)}`;
  const key = table.key.map((k) => pg.escapeIdentifier(k)).join(` || '/' || `);
  const keysOf = async (a: string, b: string) =>
    (await client.query<{ k: string }>(`SELECT (${key})::text AS k FROM (SELECT * FROM ${a} EXCEPT ALL SELECT * FROM ${b}) d ORDER BY 1`)).rows.map((r) => r.k);
  const onlyLive = await keysOf(live, rebuilt);
  const onlyRebuilt = new Set(await keysOf(rebuilt, live));
  const differing = onlyLive.filter((k) => onlyRebuilt.has(k));
  const both = new Set(differing);
  // At the verified position: a view of the events holds every event, later ones too.
  const upTo = view ? ` WHERE global_position <= ${position.toString()}` : '';
  const rows = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${live}${upTo}`)).rows[0]!.n);
  return {
    rows,
    diff: {
      projection: p.name,
      table: table.name,
      extra: onlyLive.filter((k) => !both.has(k)).slice(0, MAX_KEYS_REPORTED),
      missing: [...onlyRebuilt].filter((k) => !both.has(k)).slice(0, MAX_KEYS_REPORTED),
      differing: differing.slice(0, MAX_KEYS_REPORTED),
      columns: await differingColumns(client, table, live, rebuilt, scratch, differing.slice(0, MAX_KEYS_DETAILED)),
    },
  };
}

export async function verifyReadModel(o: {
  pool: pg.Pool;
  store: EventStore;
  projections?: readonly Projection[];
  batchSize?: number;
  onProgress?(p: BuildProgress): void;
}): Promise<VerifyReport> {
  // Earlier runs that died left theirs (a full copy of the rows): drop those nobody holds.
  await leftoverScratchSchemas(o.pool, { drop: true });
  const held = await holdScratchSchema(o.pool, `baton_verify_${randomBytes(4).toString('hex')}`);
  const scratch = held.name;
  const report: VerifyReport = { ok: true, projections: [], differences: [] };
  const source = eventSourceOf(o.store, o.pool);
  // Events rebuilt over every projection so far: a progress line counts on from one to the next, not back from 0.
  let rebuiltBefore = 0;
  const onProgress = o.onProgress && ((p: BuildProgress) => o.onProgress!({ ...p, events: rebuiltBefore + p.events }));
  try {
    for (const p of o.projections ?? allProjections) {
      // Rebuilt in the live table's form (a view of the events, or a table: tables.ts), so that
      // like is compared with like; a view without the events in this database cannot be checked.
      const liveForm = await liveFormOf(o.pool, readModelSchemaOf(o.pool), p);
      const live = await readCheckpoint(o.pool, p.name);
      if (liveForm === 'view' && !source) {
        report.ok = false;
        report.projections.push({ projection: p.name, position: String(live.position), events: 0, rows: {}, problem: `its live table is a view of this database's events, and this event store is elsewhere: the projector rebuilds it as a table when it starts (or run \`baton projections rebuild ${p.name}\`)` });
        continue;
      }
      await inTransaction(o.pool, (client) => createProjectionTables(client, scratch, p, liveForm === 'view' ? source : undefined));
      if (live.version > p.version) {
        // Not wrong, and not this build's to judge: its fold is older than the tables'.
        report.ok = false;
        report.projections.push({ projection: p.name, position: String(live.position), events: 0, rows: {}, newer: true, problem: `version ${live.version} is newer than this build (version ${p.version}): verify it with the Baton that built it (not checked here)` });
        continue;
      }
      if (live.version !== p.version) {
        report.ok = false;
        report.projections.push({ projection: p.name, position: String(live.position), events: 0, rows: {}, problem: `live tables were built by version ${live.version}, this code is version ${p.version}: run \`baton projections rebuild ${p.name}\`` });
        continue;
      }
      const built = await buildInto({ ...o, onProgress, projection: p, schema: scratch, from: START, until: live.position });
      await inTransaction(o.pool, async (client) => {
        // Hold the live checkpoint (the projector waits) and bring the rebuild level with it.
        const now = await readCheckpoint(client, p.name, { lock: true });
        const tail = await buildInto({ ...o, onProgress: undefined, projection: p, schema: scratch, from: built.position, until: now.position, client });
        const rows: Record<string, number> = {};
        for (const table of p.tables) {
          const { diff, rows: n } = await compareTable(client, p, table, scratch, readModelSchemaOf(o.pool), now.position, liveForm === 'view' && table === p.tables[0]);
          rows[table.name] = n;
          if (diff.extra.length + diff.missing.length + diff.differing.length > 0) {
            report.ok = false;
            report.differences.push(diff);
          }
        }
        report.projections.push({ projection: p.name, position: String(now.position), events: built.events + tail.events, rows });
        rebuiltBefore += built.events + tail.events;
      });
      // Equal up to its checkpoint says nothing of the events after it: say how far behind it is.
      const entry = report.projections[report.projections.length - 1]!;
      const behind = await behindOf(o.store, p, BigInt(entry.position));
      if (behind) {
        entry.behind = behind;
        if (behind.seconds > BEHIND_FAILS_AFTER_S) {
          report.ok = false;
          entry.problem = `${describeBehind(behind)}: not wrong, but not kept current (is \`baton projector\` running?)`;
        }
      }
    }
  } finally {
    await held.release();
  }
  return report;
}

export const describeBehind = (b: Behind): string =>
  `${b.events.toLocaleString('en')} event(s) behind the store, the oldest stored ${b.seconds < 120 ? `${b.seconds.toFixed(1)} s` : `${(b.seconds / 60).toFixed(1)} min`} ago`;

/** What repairs the differences found: a rebuild of each projection concerned. */
export const repairCommands = (r: VerifyReport): string[] => [...new Set(r.differences.map((d) => d.projection))].map((name) => `baton projections rebuild ${name}`);
