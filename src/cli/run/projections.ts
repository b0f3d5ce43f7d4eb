// What `baton projections status | rebuild | verify` do (their options are defined in main.ts).
import { projections, type Projection } from '../../../projections/index.ts';
import { BatonError } from '../../errors.ts';
import { countEvents } from '../../eventstore/postgres.ts';
import { readCheckpoints } from '../../readmodel/checkpoints.ts';
import { rebuildProjection } from '../../readmodel/rebuild.ts';
import { verifyReadModel } from '../../readmodel/verify.ts';
import { withContext } from '../context.ts';
import { table, toJson } from '../format.ts';
import { progressLine } from '../progress.ts';

/**
 * Matching events in the store, for a progress bar's total; undefined (a bar without a total)
 * when the events are in EventStoreDB (BATON_EVENTSTORE_URL), which has no cheap count.
 */
const eventsFor = async (ctx: { pool: import('pg').Pool; config: { eventStoreUrl: string | undefined } }, p: Projection) =>
  ctx.config.eventStoreUrl ? undefined : countEvents(ctx.pool, p.streamPrefixes);

export async function projectionsStatusCommand(o: { json?: boolean }): Promise<void> {
  await withContext(async ({ pool, store }) => {
    const rows = await Promise.all(
      (await readCheckpoints(pool)).map(async (c) => {
        const p = projections.find((x) => x.name === c.projection);
        const [next] = p ? await store.readAll({ after: c.position, limit: 1, streamPrefixes: [...p.streamPrefixes] }) : [];
        return { ...c, lagSeconds: next ? (Date.now() - next.recordedAt.getTime()) / 1000 : 0, codeVersion: p?.version };
      }),
    );
    if (o.json) return console.log(toJson(rows));
    console.log(table(['PROJECTION', 'POSITION', 'EVENTS APPLIED', 'VERSION', 'LAG'], rows.map((r) => [r.projection, String(r.position), r.eventsApplied.toLocaleString('en'), r.codeVersion === r.version ? String(r.version) : `${r.version} (code: ${r.codeVersion ?? 'gone'}; rebuild)`, `${r.lagSeconds.toFixed(1)} s`])));
  });
}

export async function projectionsRebuildCommand(name: string | undefined): Promise<void> {
  // Checked here rather than by the argument's parser, which would have to load every projection to define the command.
  if (name !== undefined && !projections.some((p) => p.name === name)) {
    throw new BatonError(`projections rebuild: unknown projection "${name}"; one of: ${projections.map((p) => p.name).join(', ')} (action_stats is part of executions)`);
  }
  await withContext(async ({ pool, store, log, config }) => {
    for (const p of projections.filter((x) => name === undefined || x.name === name)) {
      const progress = progressLine(`rebuilding ${p.name}`, await eventsFor({ pool, config }, p));
      const r = await rebuildProjection({ pool, store, projection: p, log, onProgress: (x) => progress.update(x.events) });
      progress.finish(`${r.events.toLocaleString('en')} events in ${(r.ms / 1000).toFixed(1)} s, swapped in`);
    }
  });
}

export async function projectionsVerifyCommand(o: { json?: boolean }): Promise<void> {
  await withContext(async ({ pool, store, config }) => {
    const counts = await Promise.all(projections.map((p) => eventsFor({ pool, config }, p)));
    const total = counts.includes(undefined) ? undefined : counts.reduce((a: number, b) => a + (b ?? 0), 0);
    const progress = progressLine('verifying', total);
    const done = new Map<string, number>();
    const report = await verifyReadModel({
      pool,
      store,
      onProgress: (x) => {
        done.set(x.projection, x.events);
        progress.update([...done.values()].reduce((a, b) => a + b, 0));
      },
    });
    progress.finish(report.ok ? 'the read model equals a rebuild from the events' : 'DIFFERENCES FOUND');
    if (o.json) console.log(toJson(report));
    else {
      for (const p of report.projections) {
        console.log(`${p.projection}: ${p.problem ?? `${p.events.toLocaleString('en')} events to position ${p.position}; rows ${Object.entries(p.rows).map(([t, n]) => `${t} ${n}`).join(', ')}`}`);
      }
      for (const d of report.differences) {
        const list = (what: string, keys: string[]) => (keys.length > 0 ? `\n  ${what}: ${keys.join(', ')}` : '');
        console.log(`${d.projection}.${d.table} differs:${list('rows that differ', d.differing)}${list('rows missing from the live table', d.missing)}${list('rows the events do not produce', d.extra)}`);
      }
    }
    if (!report.ok) process.exitCode = 1;
  });
}
