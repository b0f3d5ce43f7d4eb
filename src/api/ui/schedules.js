// Schedules: the list (25 a page by cursor, newest first, live on the first page) with each
// schedule's target, trigger, status, next fire times and counts, each a link to its page
// (schedule-view.js). The read model answers both, with the schedule machine's own view of them.
import { ErrorLine, graphql, html, Link, navigate, Pager, shortTime, useQuery, usePaging } from './shared.js';

const PAGE_SIZE = 25;
const LIVE_MS = 5_000;
const STATUSES = ['Active', 'Paused', 'Deleted'];
const LIST = `query Schedules($status: ScheduleStatus, $after: String) {
  schedules(status: $status, first: ${PAGE_SIZE}, after: $after) {
    edges { node { id status triggerKind cron timezone everyMs targetKind action workflow fired skipped nextFireTimes pausedAt recentTicks { tickAt } } }
    pageInfo { hasNextPage endCursor }
  }
}`;

/** 30000 → "30s", 5400000 → "1h30m": how `every` is written. */
export function every(ms) {
  const parts = [];
  let rest = ms;
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]]) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0 || parts.length === 0) parts.push(`${rest}ms`);
  return parts.join('');
}

/** "in 4 s", "in 3 min", "5 s ago": a time relative to now, for times close to it. */
export function fromNow(iso) {
  const ms = Date.parse(iso) - Date.now();
  const abs = Math.abs(ms);
  const text = abs < 1_000 ? 'now' : abs < 60_000 ? `${Math.round(abs / 1_000)} s` : abs < 3_600_000 ? `${Math.round(abs / 60_000)} min` : abs < 86_400_000 ? `${Math.round(abs / 3_600_000)} h` : `${Math.round(abs / 86_400_000)} d`;
  if (text === 'now') return text;
  return ms > 0 ? `in ${text}` : `${text} ago`;
}

export const Trigger = ({ schedule: s }) =>
  s.triggerKind === 'cron'
    ? html`<span title=${`cron, in ${s.timezone}`}><code>${s.cron}</code> <span class="muted">${s.timezone}</span></span>`
    : html`<span>every <code>${every(s.everyMs)}</code></span>`;

/** What a schedule starts: its action (a link to its executions) or its workflow. */
export const Target = ({ schedule: s }) =>
  s.targetKind === 'action'
    ? html`<${Link} to=${{ view: 'executions', action: s.action }} title="Its action's executions">${s.action}</${Link}>`
    : html`<span>workflow <strong>${typeof s.workflow?.name === 'string' ? s.workflow.name : 'unnamed'}</strong></span>`;

export const ScheduleBadge = ({ status }) => html`<span class=${`badge badge--s-${status}`} data-testid="schedule-status">${status}</span>`;

function NextFires({ times }) {
  if (times.length === 0) return html`<span class="muted">—</span>`;
  return html`<span title=${times.map((t) => new Date(t).toLocaleString()).join('\n')} data-testid="next-fire">${shortTime(times[0])} <span class="muted">(${fromNow(times[0])})</span>${times.length > 1 ? html`<span class="muted">, then ${fromNow(times[1])}</span>` : ''}</span>`;
}

function Row({ node }) {
  const last = node.recentTicks.at(-1);
  return html`<tr data-testid="schedule-row" data-id=${node.id} data-status=${node.status}>
    <td><${Link} to=${{ schedule: node.id }} class="mono">${node.id}</${Link}></td>
    <td><${Target} schedule=${node} /></td>
    <td><${Trigger} schedule=${node} /></td>
    <td><${ScheduleBadge} status=${node.status} /></td>
    <td><${NextFires} times=${node.nextFireTimes} /></td>
    <td class="num" data-testid="schedule-fired">${node.fired}</td>
    <td class="num">${node.skipped}</td>
    <td>${last ? shortTime(last.tickAt) : html`<span class="muted">never</span>`}</td>
  </tr>`;
}

export function SchedulesView({ params }) {
  const status = STATUSES.includes(params.get('status')) ? params.get('status') : '';
  const paging = usePaging(params);
  const list = useQuery(() => graphql(LIST, { status: status || null, after: paging.after }), `schedules:${status}:${paging.after}`, { pollMs: paging.page === 1 ? LIVE_MS : undefined });
  const edges = list.data?.schedules.edges ?? [];
  return html`<section class="view" aria-labelledby="schedules-title">
    <div class="view-head">
      <h1 id="schedules-title">Schedules</h1>
      <label>Status
        <select value=${status} onChange=${(e) => navigate({ view: 'schedules', status: e.currentTarget.value }, { replace: true })} data-testid="schedule-status-filter">
          <option value="">active or paused</option>
          ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
        </select></label>
    </div>
    <p class="muted">Each schedule starts its action or workflow on its trigger (<code>baton schedule</code>, or <code>createSchedule</code> in GraphQL). Next fire times include the jitter; none while paused.</p>
    <${ErrorLine} error=${list.error} />
    <div class="table-wrap">
      <table class="list" data-testid="schedules-table">
        <thead><tr><th>Schedule</th><th>Target</th><th>Trigger</th><th>Status</th><th>Next fire</th><th class="num">Fired</th><th class="num">Skipped</th><th>Last tick</th></tr></thead>
        <tbody>${edges.map(({ node }) => html`<${Row} key=${node.id} node=${node} />`)}</tbody>
      </table>
      ${!list.loading && !list.error && edges.length === 0 && html`<p class="hint" data-testid="schedules-empty">No schedules${status ? ` ${status.toLowerCase()}` : ''}.</p>`}
    </div>
    ${list.data && html`<${Pager} paging=${paging} pageInfo=${list.data.schedules.pageInfo} />`}
  </section>`;
}
