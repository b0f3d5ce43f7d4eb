// Actions: per action, throughput and p50/p95 run time over a chosen window as small charts,
// failure rate, queue depth, and its concurrency limit with the slots held. The counters come
// from the projected action_stats (one row per action); each card's charts from actionTimeline
// (slices computed by Postgres), so nothing here grows with the number of executions.
import { duration, ErrorLine, graphql, html, Link, navigate, useQuery } from './shared.js';
import { LatencyChart, ThroughputChart } from './chart.js';

const LIVE_MS = 5_000;
const CHART_MS = 15_000;
const STATS = `query ActionStats { actionStats { action requested queued running completed failed cancelled timedOut abandoned retried p50Ms p95Ms concurrencyLimit concurrencyKey slotsHeld } }`;
const TIMELINE = `query ActionTimeline($action: String!, $since: DateTime!, $buckets: Int!) {
  actionTimeline(action: $action, since: $since, buckets: $buckets) { start end finished completed failed p50Ms p95Ms }
}`;
const WINDOWS = [
  { id: '1h', label: 'last hour', ms: 3_600_000, buckets: 30 },
  { id: '24h', label: 'last 24 hours', ms: 86_400_000, buckets: 48 },
  { id: '7d', label: 'last 7 days', ms: 7 * 86_400_000, buckets: 56 },
];

const percent = (part, whole) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)} %` : '—');

function ActionCard({ stats, window }) {
  const since = () => new Date(Date.now() - window.ms).toISOString();
  const timeline = useQuery(() => graphql(TIMELINE, { action: stats.action, since: since(), buckets: window.buckets }), `${stats.action}:${window.id}`, { pollMs: CHART_MS });
  const buckets = timeline.data?.actionTimeline ?? [];
  const finished = stats.completed + stats.failed + stats.cancelled + stats.timedOut + stats.abandoned;
  const failedAll = stats.failed + stats.timedOut + stats.abandoned;
  const recent = buckets.reduce((s, b) => ({ finished: s.finished + b.finished, failed: s.failed + b.failed }), { finished: 0, failed: 0 });
  const peak = Math.max(0, ...buckets.map((b) => b.finished));
  const slowest = Math.max(0, ...buckets.map((b) => b.p95Ms ?? 0));
  return html`<article class="panel action-card" aria-labelledby=${`action-${stats.action}`} data-testid="action-card" data-action=${stats.action}>
    <header class="action-head">
      <h2 id=${`action-${stats.action}`}><${Link} to=${{ view: 'executions', action: stats.action }} title="Its executions">${stats.action}</${Link}></h2>
      <span class="muted">${stats.requested} requested</span>
    </header>
    <dl class="stats">
      <div><dt>Queued</dt><dd data-testid="queued">${stats.queued}</dd></div>
      <div><dt>Running</dt><dd>${stats.running}</dd></div>
      <div><dt>Failure rate</dt><dd data-testid="failure-rate" title=${`${failedAll} of ${finished} finished failed, timed out or were abandoned`}>${percent(failedAll, finished)}</dd></div>
      <div><dt>p50 / p95</dt><dd>${duration(stats.p50Ms)} / ${duration(stats.p95Ms)}</dd></div>
      <div><dt>Concurrency</dt><dd data-testid="slots">${stats.concurrencyLimit === null ? html`<span class="muted">no limit</span> · ${stats.slotsHeld} held` : html`${stats.slotsHeld} / ${stats.concurrencyLimit} slots${stats.concurrencyKey ? html` <span class="muted">per ${stats.concurrencyKey}</span>` : ''}`}</dd></div>
      <div><dt>Retried</dt><dd>${stats.retried}</dd></div>
    </dl>
    <${ErrorLine} error=${timeline.error} />
    <div class="charts">
      <figure>
        <figcaption>Throughput, ${window.label} <span class="muted">(${recent.finished} finished, ${percent(recent.failed, recent.finished)} failed; top: ${peak} per slice)</span></figcaption>
        <${ThroughputChart} buckets=${buckets} label=${`${stats.action}: executions finished per slice, ${window.label}`} />
      </figure>
      <figure>
        <figcaption>Run time <span class="legend legend--p50">p50</span> <span class="legend legend--p95">p95</span> <span class="muted">(top: ${duration(slowest || null)})</span></figcaption>
        <${LatencyChart} buckets=${buckets} label=${`${stats.action}: p50 and p95 run time per slice, ${window.label}`} />
      </figure>
    </div>
  </article>`;
}

export function ActionsView({ params }) {
  const stats = useQuery(() => graphql(STATS), 'stats', { pollMs: LIVE_MS });
  const window = WINDOWS.find((w) => w.id === params.get('window')) ?? WINDOWS[0];
  const only = params.get('action');
  const list = (stats.data?.actionStats ?? []).filter((s) => !only || s.action === only);
  return html`<section class="view" aria-labelledby="actions-title">
    <div class="view-head">
      <h1 id="actions-title">Actions${only ? html` <span class="muted">· ${only}</span> <${Link} to=${{ view: 'actions', window: params.get('window') }} class="small">all</${Link}>` : ''}</h1>
      <label>Window
        <select value=${window.id} onChange=${(e) => navigate({ view: 'actions', action: only, window: e.currentTarget.value }, { replace: true })} data-testid="window">
          ${WINDOWS.map((w) => html`<option value=${w.id}>${w.label}</option>`)}
        </select></label>
    </div>
    <${ErrorLine} error=${stats.error} />
    <div class="action-grid">${list.map((s) => html`<${ActionCard} key=${`${s.action}:${window.id}`} stats=${s} window=${window} />`)}</div>
    ${!stats.loading && !stats.error && list.length === 0 && html`<p class="hint">No action has been requested yet.</p>`}
  </section>`;
}
