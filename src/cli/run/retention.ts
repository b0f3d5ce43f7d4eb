// What `baton retention run` does (its options are defined in retention-command.ts).
import path from 'node:path';
import { formatAge, parseAge, SUGGESTED_RETENTION } from '../../retention/age.ts';
import { runRetention } from '../../retention/retention.ts';
import { withContext } from '../context.ts';
import { toJson } from '../format.ts';
import { stopGracefullyOnSignal } from '../interrupt.ts';
import { progressLine } from '../progress.ts';

/** `1 execution`, `2 executions`, `1,200 workflows`. */
const count = (n: number, noun: string) => `${n.toLocaleString('en')} ${noun}${n === 1 ? '' : 's'}`;

export async function retentionRunCommand(o: { olderThan?: number; archive?: string; dryRun?: boolean; json?: boolean }): Promise<void> {
  await withContext(async ({ pool, store, config, log }) => {
    const olderThanMs = o.olderThan ?? config.retention?.olderThanMs ?? parseAge(SUGGESTED_RETENTION)!;
    const archiveDir = path.resolve(o.archive ?? config.retention?.archiveDir ?? path.join(config.dataDir, 'archive'));
    const label = `${o.dryRun ? 'retention (dry run)' : 'retention'}: finished more than ${formatAge(olderThanMs)} ago`;
    // Made at the first report, which knows the total (the candidates the read model proposes).
    let bar: ReturnType<typeof progressLine> | undefined;
    const progress = () => (bar ??= progressLine(label, undefined, process.stderr, 'executions and workflows'));
    // Each batch commits whole (archive files, then the store and the read model in one transaction): a signal lets the one in progress finish.
    const stop = stopGracefullyOnSignal('batch');
    let s: Awaited<ReturnType<typeof runRetention>>;
    try {
      s = await runRetention({
        pool,
        store,
        olderThanMs,
        archiveDir,
        dryRun: o.dryRun === true,
        log,
        signal: stop.signal,
        onProgress: (done, total) => (bar ??= progressLine(label, total, process.stderr, 'executions and workflows')).update(done),
      });
    } finally {
      stop.dispose();
    }
    const interrupted = stop.received();
    const verb = s.dryRun ? 'would archive' : 'archived';
    progress().finish(`${verb} ${count(s.executions, 'execution')} (${count(s.workflows, 'workflow')}), ${count(s.events, 'event')}, in ${(s.ms / 1000).toFixed(1)} s${interrupted ? ` (stopped by ${interrupted})` : ''}`);
    if (o.json) return console.log(toJson({ ...s, ...(interrupted && { interrupted }) }));
    const lines = [
      `${verb} ${count(s.executions, 'execution')} and ${count(s.workflows, 'workflow')} finished before ${s.cutoff} ` +
        `(${count(s.events, 'event')})${s.dryRun ? '' : ` to ${s.archiveDir}`}`,
    ];
    if (interrupted) lines.push(`stopped by ${interrupted} before the end: run the same command again to go on (what is archived stays archived)`);
    if (s.skipped.length > 0) {
      lines.push(`skipped ${s.skipped.length}:`);
      for (const k of s.skipped.slice(0, 20)) lines.push(`  ${k.id}: ${k.reason}`);
      if (s.skipped.length > 20) lines.push(`  … and ${s.skipped.length - 20} more (--json lists them all)`);
    }
    console.log(lines.join('\n'));
  });
}
