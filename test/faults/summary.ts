// One summary row per scenario: printed after each test file and kept, one section per file, in
// .baton/fault-results.md.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const RESULTS_FILE = fileURLToPath(new URL('../../.baton/fault-results.md', import.meta.url));

export interface FaultSummary {
  scenario: string;
  executions: number;
  faultsInjected: number;
  lost: number;
  duplicatedRuns: number;
  stuck: number;
  /**
   * Longest time from a fault until every execution it hit was terminal; null when
   * some never were, undefined without faults.
   */
  maxRecoveryMs: number | null | undefined;
  /** The execution (and fault) that took maxRecoveryMs. */
  slowest?: string;
  violations: number;
  passed: boolean;
  note?: string;
}

const summaries: FaultSummary[] = [];

/** Keep a scenario's row for this file's table. */
export function recordSummary(row: FaultSummary): void {
  summaries.push(row);
}

const cell = (v: number | null | undefined) => (v === undefined ? '—' : v === null ? 'never' : Number.isNaN(v) ? '?' : v.toLocaleString('en'));

export function summaryTable(rows: readonly FaultSummary[]): string {
  const header = '| scenario | executions | faults | lost | duplicated runs | stuck | violations | max recovery ms | result |';
  const rule = '|---|---:|---:|---:|---:|---:|---:|---:|---|';
  const lines = rows.map(
    (r) =>
      `| ${r.scenario} | ${cell(r.executions)} | ${cell(r.faultsInjected)} | ${cell(r.lost)} | ${cell(r.duplicatedRuns)} | ${cell(r.stuck)} | ${cell(r.violations)} | ${cell(r.maxRecoveryMs)} | ${r.passed ? 'pass' : `FAIL${r.note ? `: ${r.note.replace(/\|/g, '\\|')}` : ''}`} |`,
  );
  const slowest = rows.filter((r) => r.slowest).map((r) => `- ${r.scenario}: slowest recovery ${cell(r.maxRecoveryMs)} ms, execution ${r.slowest}`);
  return [header, rule, ...lines, ...(slowest.length > 0 ? ['', ...slowest] : [])].join('\n');
}

/** Print this file's rows and write them as this file's section of .baton/fault-results.md. */
export async function reportSummaries(title: string): Promise<void> {
  if (summaries.length === 0) return;
  const table = summaryTable(summaries);
  console.log(`\nfault injection: ${title}\n${table}\n`);
  const begin = `<!-- ${title} -->`;
  const end = `<!-- /${title} -->`;
  const section = `${begin}\n## ${title}\n\n${new Date().toISOString()}\n\n${table}\n${end}`;
  await fs.mkdir(path.dirname(RESULTS_FILE), { recursive: true });
  const previous = await fs.readFile(RESULTS_FILE, 'utf8').catch(() => '# Fault-injection results\n');
  const at = previous.indexOf(begin);
  const stop = previous.indexOf(end);
  const next = at >= 0 && stop > at ? `${previous.slice(0, at)}${section}${previous.slice(stop + end.length)}` : `${previous.trimEnd()}\n\n${section}\n`;
  await fs.writeFile(RESULTS_FILE, next);
}
