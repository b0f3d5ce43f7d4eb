// deploy/grafana/baton.json and deploy/prometheus/alerts.yml name only metrics Baton exports: a
// renamed metric or label must break this test, not a dashboard nobody looks at until the outage.
// The registry is the real one, filled by an embedded worker with the executor and projector (every
// host's metrics in one process) and every optional part that registers metrics turned on
// (BATON_RETENTION); every label value an expression matches on is one the code sets. Every metric
// the sources declare is on the dashboard or in NOT_ON_DASHBOARD, saying why: the retention
// counters, registered only with BATON_RETENTION, had no panel and no test noticed.
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startWorker, type EmbeddedWorker } from '@baton-run/baton/worker';
import { silentLogger } from '../../src/log.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const ROOT = path.resolve('.');
/** Series Prometheus makes of a histogram. */
const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];

/**
 * Metrics left off the dashboard on purpose, each with the reason (none today). A new metric goes
 * on the dashboard or here: the test below fails until it is one or the other.
 */
const NOT_ON_DASHBOARD: Record<string, string> = {};

/**
 * Settings that turn on parts registering metrics of their own, set while the worker starts.
 * BATON_RETENTION: the retention schedule's counters (its first run is a minute after start, long
 * after this worker has stopped).
 */
const OPTIONAL_PARTS = { BATON_RETENTION: '90d' };

interface Exported {
  type: string;
  labels: Set<string>;
}

let db: TestDatabase;
let worker: EmbeddedWorker;
let exported: Map<string, Exported>;
let sources: string;
/** Every `baton_…` name written in a module that imports prom-client: the metrics the sources declare. */
let declared: Set<string>;

beforeAll(async () => {
  db = await createTestDatabase({ max: 1 });
  const saved = Object.fromEntries(Object.keys(OPTIONAL_PARTS).map((k) => [k, process.env[k]]));
  Object.assign(process.env, OPTIONAL_PARTS);
  try {
    worker = await startWorker({ databaseUrl: db.url, actions: [], executor: true, projector: true, logger: silentLogger(), shutdownTimeoutMs: 1_000 });
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  exported = new Map(
    (await worker.registry.getMetricsAsJSON()).map((m) => [m.name, { type: String(m.type), labels: new Set(((worker.registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] }).labelNames ?? []) as string[]) }]),
  );
  const files = await fs.readdir(path.join(ROOT, 'src'), { recursive: true });
  const texts = await Promise.all(files.filter((f) => f.endsWith('.ts')).map((f) => fs.readFile(path.join(ROOT, 'src', f), 'utf8')));
  sources = texts.join('\n');
  declared = new Set(texts.filter((t) => /from 'prom-client'/.test(t)).flatMap((t) => [...t.matchAll(/'(baton_[a-z0-9_]+)'/g)].map((m) => m[1]!)));
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await db?.drop();
});

/** Every `baton_…` series an expression reads, with the label matchers written on it. */
function seriesIn(expr: string): { series: string; matchers: { label: string; op: string; value: string }[] }[] {
  const out = [];
  for (const m of expr.matchAll(/\b(baton_[a-z0-9_]+)(\{([^}]*)\})?/g)) {
    const matchers = [...(m[3] ?? '').matchAll(/([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map((x) => ({ label: x[1]!, op: x[2]!, value: x[3]! }));
    out.push({ series: m[1]!, matchers });
  }
  return out;
}

/** The exported metric a series belongs to (a histogram's `_bucket` belongs to the histogram). */
function metricOf(series: string): { name: string; metric: Exported } | undefined {
  if (exported.has(series)) return { name: series, metric: exported.get(series)! };
  for (const suffix of HISTOGRAM_SUFFIXES) {
    const base = series.endsWith(suffix) ? series.slice(0, -suffix.length) : undefined;
    if (base && exported.get(base)?.type === 'histogram') return { name: base, metric: exported.get(base)! };
  }
  return undefined;
}

function problemsIn(where: string, expr: string): string[] {
  const problems: string[] = [];
  for (const { series, matchers } of seriesIn(expr)) {
    const found = metricOf(series);
    if (!found) {
      problems.push(`${where}: ${series} is not a metric Baton exports`);
      continue;
    }
    for (const { label, op, value } of matchers) {
      if (label === 'job' || label === 'instance') continue; // Prometheus adds them when it scrapes
      if (!found.metric.labels.has(label) && !(label === 'le' && found.metric.type === 'histogram')) problems.push(`${where}: ${found.name} has no label "${label}"`);
      else if (op === '=' && !sources.includes(`'${value}'`)) problems.push(`${where}: no source sets ${label}="${value}"`);
      else if (op === '=~') for (const v of value.split('|')) if (!sources.includes(`'${v}'`)) problems.push(`${where}: no source sets ${label}="${v}"`);
    }
  }
  return problems;
}

describe('deploy/', () => {
  it('the registry has the metrics the issue asks to watch', () => {
    for (const name of ['baton_executions_terminal_total', 'baton_pickup_latency_seconds', 'baton_action_queued', 'baton_executions_stalled', 'baton_executor_deadlines_enforced_total', 'baton_projection_lag_seconds', 'baton_worker_in_flight']) {
      expect(exported.has(name), name).toBe(true);
    }
  });

  it('the Grafana dashboard parses, and every metric and label its queries name exists', async () => {
    const dashboard = JSON.parse(await fs.readFile(path.join(ROOT, 'deploy/grafana/baton.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: t.expr })));
    expect(exprs.length).toBeGreaterThan(20);
    expect(exprs.flatMap(({ where, expr }) => problemsIn(where, expr))).toEqual([]);
    // Every metric Baton exports is on the dashboard or left off on purpose, so a new one is a
    // decision, not an oversight; and nothing is listed as left off that is shown or gone.
    const shown = new Set(exprs.flatMap(({ expr }) => seriesIn(expr).map((s) => metricOf(s.series)?.name)));
    expect([...exported.keys()].filter((n) => n.startsWith('baton_') && !shown.has(n) && !(n in NOT_ON_DASHBOARD))).toEqual([]);
    expect(Object.keys(NOT_ON_DASHBOARD).filter((n) => shown.has(n) || !exported.has(n))).toEqual([]);
  });

  it('the registry above has every metric the sources declare, those of optional parts too', () => {
    // A metric registered only when a setting turns its part on is missing from a plain worker's
    // registry, and so from the check above: such a part goes in OPTIONAL_PARTS.
    expect(declared.size).toBeGreaterThan(30);
    expect([...declared].filter((n) => !exported.has(n))).toEqual([]);
    expect(['baton_retention_archived_total', 'baton_retention_events_removed_total', 'baton_retention_runs_total'].filter((n) => !exported.has(n))).toEqual([]);
  });

  it('the Prometheus alert rules parse, and every metric and label they name exists', async () => {
    const rules = parseYaml(await fs.readFile(path.join(ROOT, 'deploy/prometheus/alerts.yml'), 'utf8')) as { groups: { rules: { alert: string; expr: string; for?: string }[] }[] };
    const all = rules.groups.flatMap((g) => g.rules);
    expect(all.length).toBeGreaterThan(5);
    for (const r of all) expect(Object.keys(r).sort(), r.alert).toEqual(expect.arrayContaining(['alert', 'expr', 'labels', 'annotations']));
    expect(all.flatMap((r) => problemsIn(`alert ${r.alert}`, r.expr))).toEqual([]);
  });

  it('the check finds a misspelt metric, label or label value', () => {
    expect(problemsIn('x', 'rate(baton_executions_terminal_totl[5m])')).toEqual(['x: baton_executions_terminal_totl is not a metric Baton exports']);
    expect(problemsIn('x', 'baton_action_queued{actoin="a"}')).toEqual(['x: baton_action_queued has no label "actoin"']);
    expect(problemsIn('x', 'baton_executor_deadlines_enforced_total{kind="dead leter"}')).toEqual(['x: no source sets kind="dead leter"']);
    expect(problemsIn('x', 'baton_pickup_latency_seconds_bucket{le="1"}')).toEqual([]);
  });
});
