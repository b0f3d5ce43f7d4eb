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
}

export interface VerifyReport {
  ok: boolean;
  projections: { projection: string; position: string; events: number; rows: Record<string, number>; problem?: string }[];
  differences: TableDifference[];
}

const MAX_KEYS_REPORTED = 50;

async function compareTable(client: pg.ClientBase, p: Projection, table: Projection['tables'][number], scratch: string, liveSchema: string): Promise<{ diff: TableDifference; rows: number }> {
  const live = `${pg.escapeIdentifier(liveSchema)}.${pg.escapeIdentifier(table.name)}`;
  const rebuilt = `${pg.escapeIdentifier(scratch)}.${pg.escapeIdentifier(table.name)}`;
  const key = table.key.map((k) => pg.escapeIdentifier(k)).join(` || '/' || `);
  const keysOf = async (a: string, b: string) =>
    (await client.query<{ k: string }>(`SELECT (${key})::text AS k FROM (SELECT * FROM ${a} EXCEPT ALL SELECT * FROM ${b}) d ORDER BY 1`)).rows.map((r) => r.k);
  const onlyLive = await keysOf(live, rebuilt);
  const onlyRebuilt = new Set(await keysOf(rebuilt, live));
  const differing = onlyLive.filter((k) => onlyRebuilt.has(k));
  const both = new Set(differing);
  const rows = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${live}`)).rows[0]!.n);
  return {
    rows,
    diff: {
      projection: p.name,
      table: table.name,
      extra: onlyLive.filter((k) => !both.has(k)).slice(0, MAX_KEYS_REPORTED),
      missing: [...onlyRebuilt].filter((k) => !both.has(k)).slice(0, MAX_KEYS_REPORTED),
      differing: differing.slice(0, MAX_KEYS_REPORTED),
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
  const scratch = `baton_verify_${randomBytes(4).toString('hex')}`;
  const report: VerifyReport = { ok: true, projections: [], differences: [] };
  await o.pool.query(`CREATE SCHEMA ${pg.escapeIdentifier(scratch)}`);
  const source = eventSourceOf(o.store, o.pool);
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
      if (live.version !== p.version) {
        report.ok = false;
        report.projections.push({ projection: p.name, position: String(live.position), events: 0, rows: {}, problem: `live tables were built by version ${live.version}, this code is version ${p.version}: run \`baton projections rebuild ${p.name}\`` });
        continue;
      }
      const built = await buildInto({ ...o, projection: p, schema: scratch, from: START, until: live.position });
      await inTransaction(o.pool, async (client) => {
        // Hold the live checkpoint (the projector waits) and bring the rebuild level with it.
        const now = await readCheckpoint(client, p.name, { lock: true });
        const tail = await buildInto({ ...o, projection: p, schema: scratch, from: built.position, until: now.position, client });
        const rows: Record<string, number> = {};
        for (const table of p.tables) {
          const { diff, rows: n } = await compareTable(client, p, table, scratch, readModelSchemaOf(o.pool));
          rows[table.name] = n;
          if (diff.extra.length + diff.missing.length + diff.differing.length > 0) {
            report.ok = false;
            report.differences.push(diff);
          }
        }
        report.projections.push({ projection: p.name, position: String(now.position), events: built.events + tail.events, rows });
      });
    }
  } finally {
    await o.pool.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(scratch)} CASCADE`);
  }
  return report;
}
