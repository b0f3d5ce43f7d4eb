// What `baton migrate [--check]` does: bring the database up to date for this build (every
// process does so as it opens it, unless BATON_MIGRATE=off), or say what that would apply.
// A deployment whose hosts run with a role that may not create tables runs this first, as a
// role that may, and sets BATON_MIGRATE=off on the hosts.
import type pg from 'pg';
import { projections } from '../../../projections/index.ts';
import type { EventSource } from '../../../projections/projection.ts';
import type { Config } from '../../config.ts';
import { migrateAll, pendingForThisBuild } from '../../db/all-migrations.ts';
import { openDatabase, redactUrl } from '../../db/connect.ts';
import { createPostgresEventStore } from '../../eventstore/postgres.ts';
import { eventSourceOf } from '../../readmodel/event-source.ts';
import { alignStoreViews, relationsToTurnIntoViews } from '../../readmodel/store-views.ts';
import { cliConfig, cliLogger } from '../context.ts';
import { toJson } from '../format.ts';

export async function migrateCommand(o: { check?: boolean; json?: boolean }): Promise<void> {
  const config = cliConfig();
  const log = cliLogger(config);
  const db = await openDatabase(config, log, { max: 2, applicationName: 'baton-migrate', migrations: 'none' });
  try {
    const database = db.embedded ? `the embedded Postgres in ${db.embeddedClusterDir}` : redactUrl(db.url);
    // An installation in a schema of its own (BATON_DB_SCHEMA) is named with it: a mistyped schema is another installation.
    const where = config.dbSchema === undefined ? database : `${database}, schema ${config.dbSchema} (BATON_DB_SCHEMA)`;
    const source = await eventSourceFor(config, db.pool);
    // A projection read straight from the events (store-views.ts) becomes a view of them, which
    // the projector would otherwise do as it starts, needing a role that may drop its table.
    const views = (await relationsToTurnIntoViews(db.pool, projections, source)).map((p) => p.name);
    const pending = await pendingForThisBuild(db.pool);
    if (o.check) {
      const all = withViews(pending, views);
      if (all.length > 0) process.exitCode = 1;
      if (o.json) return console.log(toJson({ database, ...(config.dbSchema !== undefined && { schema: config.dbSchema }), pending: all }));
      if (all.length === 0) return console.log(`${where} is up to date: nothing to apply`);
      return console.log(`${where}: ${count(all.length)} pending (\`baton migrate\` applies them):\n${indent(all)}`);
    }
    // The locked pass: another process migrating at the same time is waited for, not raced.
    const applied = pending.length === 0 ? [] : await migrateAll(db.pool, { log });
    if (views.length > 0) await alignStoreViews(db.pool, projections.filter((p) => views.includes(p.name)), source, log);
    const all = withViews(applied, views);
    if (o.json) return console.log(toJson({ database, ...(config.dbSchema !== undefined && { schema: config.dbSchema }), applied: all }));
    if (all.length === 0) return console.log(`${where} is up to date: nothing to apply`);
    console.log(`${where}: applied ${count(all.length)}:\n${indent(all)}`);
  } finally {
    await db.close();
  }
}

/** With the events in this database (no BATON_EVENTSTORE_URL), the table projections may read them from. */
async function eventSourceFor(config: Config, pool: pg.Pool): Promise<EventSource | undefined> {
  if (config.eventStoreUrl) return undefined;
  const store = createPostgresEventStore(pool);
  try {
    return eventSourceOf(store, pool);
  } finally {
    await store.close();
  }
}

/** `ids`, with each projection becoming a view said so (`read-model/<name>` once, created or turned). */
function withViews(ids: readonly string[], views: readonly string[]): string[] {
  const label = (name: string) => `read-model/${name} (a view of the events)`;
  const listed = ids.map((id) => (views.some((v) => id === `read-model/${v}`) ? label(id.slice('read-model/'.length)) : id));
  return [...listed, ...views.filter((v) => !ids.includes(`read-model/${v}`)).map(label)];
}

const count = (n: number) => `${n} migration${n === 1 ? '' : 's'}`;
const indent = (ids: readonly string[]) => ids.map((id) => `  ${id}`).join('\n');
