// What `baton projections status | rebuild | verify` do (their options are defined in main.ts).
import { projections, type Projection } from '../../../projections/index.ts';
import { BatonError } from '../../errors.ts';
import { countEvents } from '../../eventstore/postgres.ts';
import { readCheckpoints } from '../../readmodel/checkpoints.ts';
import { oldestUnapplied } from '../../readmodel/lag.ts';
import { rebuildProjection } from '../../readmodel/rebuild.ts';
import { interruptCleanup, leftoverScratchSchemas } from '../../readmodel/scratch.ts';
import { BEHIND_FAILS_AFTER_S, describeBehind, repairCommands, verifyReadModel } from '../../readmodel/verify.ts';
import { readContext, withContext } from '../context.ts';
import { table, toJson } from '../format.ts';
import { INTERRUPT_SIGNALS, SIGNAL_EXIT_CODES, type InterruptSignal } from '../interrupt.ts';
import { progressLine, type Progress } from '../progress.ts';

/**
 * Matching events in the store, for a progress bar's total; undefined (a bar without a total)
 * when the events are in EventStoreDB (BATON_EVENTSTORE_URL), which has no cheap count.
 */
const eventsFor = async (ctx: { pool: import('pg').Pool; config: { eventStoreUrl: string | undefined } }, p: Projection) =>
  ctx.config.eventStoreUrl ? undefined : countEvents(ctx.pool, p.streamPrefixes);

/**
 * Ctrl-C (or SIGTERM, as a deploy tool stops it, or SIGHUP) while a scratch schema is in use:
 * drop it (scratch.ts) and say so, rather than leave a copy of the read model behind without a
 * word. Exits 128 + the signal's number. Returns the remover of the handlers.
 */
export function cleanUpOnInterrupt(databaseUrl: string | undefined): () => void {
  const onSignal = (signal: InterruptSignal) => {
    for (const s of INTERRUPT_SIGNALS) process.off(s, onSignal);
    process.stderr.write(`\ninterrupted (${signal === 'SIGINT' ? 'Ctrl-C' : signal}): cleaning up…\n`);
    // The sessions interruptCleanup ends are this process's own: their errors are expected now.
    process.on('uncaughtException', () => undefined);
    void interruptCleanup(databaseUrl).then(({ dropped, left }) => {
      if (dropped.length > 0) process.stderr.write(`dropped scratch schema(s) ${dropped.join(', ')}\n`);
      if (left.length > 0) process.stderr.write(`could not drop ${left.join(', ')} now: the next \`baton projections verify\` removes it\n`);
      if (dropped.length + left.length === 0) process.stderr.write('nothing to clean up\n');
      process.exit(SIGNAL_EXIT_CODES[signal]);
    });
  };
  for (const s of INTERRUPT_SIGNALS) process.once(s, onSignal);
  return () => {
    for (const s of INTERRUPT_SIGNALS) process.off(s, onSignal);
  };
}


export async function projectionsStatusCommand(o: { json?: boolean }): Promise<void> {
  await readContext(async ({ pool, store }) => {
    const leftovers = await leftoverScratchSchemas(pool, { drop: false });
    if (leftovers.length > 0) process.stderr.write(`scratch schema(s) left by an interrupted verify or rebuild: ${leftovers.join(', ')} (the next \`baton projections verify\` drops them)\n`);
    const rows = await Promise.all(
      (await readCheckpoints(pool)).map(async (c) => {
        const p = projections.find((x) => x.name === c.projection);
        const next = p ? await oldestUnapplied(store, c.position, p.streamPrefixes) : undefined;
        return { ...c, lagSeconds: next ? Math.max(0, (Date.now() - next.getTime()) / 1000) : 0, codeVersion: p?.version };
      }),
    );
    if (o.json) return console.log(toJson(rows));
    console.log(table(['PROJECTION', 'POSITION', 'EVENTS APPLIED', 'VERSION', 'LAG'], rows.map((r) => [r.projection, String(r.position), r.eventsApplied.toLocaleString('en'), versionCell(r.version, r.codeVersion), `${r.lagSeconds.toFixed(1)} s`])));
  });
}

const versionCell = (stored: number, code: number | undefined): string =>
  code === stored ? String(stored) : code !== undefined && stored > code ? `${stored} (newer than this build, ${code}: upgrade)` : `${stored} (code: ${code ?? 'gone'}; rebuild)`;

export async function projectionsRebuildCommand(name: string | undefined): Promise<void> {
  // Checked here rather than by the argument's parser, which would have to load every projection to define the command.
  if (name !== undefined && !projections.some((p) => p.name === name)) {
    throw new BatonError(`projections rebuild: unknown projection "${name}"; one of: ${projections.map((p) => p.name).join(', ')} (action_stats is part of executions)`);
  }
  await withContext(async ({ pool, store, log, config, databaseUrl }) => {
    const uninstall = cleanUpOnInterrupt(databaseUrl);
    try {
      for (const p of projections.filter((x) => name === undefined || x.name === name)) {
        let progress: Progress | undefined;
        const r = await rebuildProjection({
          pool,
          store,
          projection: p,
          log,
          onWait: () => process.stderr.write(`another rebuild of ${p.name} is running (the projector's, or another \`projections rebuild\`): waiting for it to finish\n`),
          // Counted once the rebuild is ours to run: after a wait the store has grown.
          onStart: async () => void (progress = progressLine(`rebuilding ${p.name}`, await eventsFor({ pool, config }, p))),
          onProgress: (x) => progress?.update(x.events),
        });
        if (r.skipped) process.stderr.write(`${r.skipped}\n`);
        else progress?.finish(`${r.events.toLocaleString('en')} events in ${(r.ms / 1000).toFixed(1)} s, swapped in`);
      }
    } finally {
      uninstall();
    }
  });
}

export async function projectionsVerifyCommand(o: { json?: boolean }): Promise<void> {
  await readContext(async ({ pool, store, config, databaseUrl }) => {
    const uninstall = cleanUpOnInterrupt(databaseUrl);
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
    }).finally(uninstall);
    const differs = report.differences.length > 0;
    const unverified = report.projections.some((p) => p.problem && !p.behind);
    progress.finish(differs ? 'DIFFERENCES FOUND' : unverified ? 'NOT VERIFIED' : report.ok ? 'the read model equals a rebuild from the events' : 'BEHIND THE STORE for too long');
    if (o.json) console.log(toJson(report));
    else {
      for (const p of report.projections) {
        const counted = p.newer || p.events + Object.keys(p.rows).length === 0 ? '' : `${p.events.toLocaleString('en')} events to position ${p.position}; rows ${Object.entries(p.rows).map(([t, n]) => `${t} ${n}`).join(', ')}`;
        const behind = p.behind && !p.problem ? `${counted ? '; ' : ''}${describeBehind(p.behind)} (not wrong: a running projector applies them; behind over ${BEHIND_FAILS_AFTER_S} s fails verify)` : '';
        console.log(`${p.projection}: ${[counted + behind, p.problem].filter(Boolean).join('; ')}`);
      }
      for (const d of report.differences) {
        const list = (what: string, keys: string[]) => (keys.length > 0 ? `\n  ${what}: ${keys.join(', ')}` : '');
        // The first few with the columns that differ.
        const differing = d.differing.map((k) => (d.columns[k] ? `${k} (${d.columns[k]!.join(', ') || 'a duplicate row'})` : k));
        console.log(`${d.projection}.${d.table} differs:${list('rows that differ', differing)}${list('rows missing from the live table', d.missing)}${list('rows the events do not produce', d.extra)}`);
      }
      for (const cmd of repairCommands(report)) console.log(`repair: ${cmd}   (rebuilds it from the events, then swaps it in)`);
    }
    if (!report.ok) process.exitCode = 1;
  });
}
