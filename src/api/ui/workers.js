// Workers: alive, draining or lost; capacity and load; the actions each offers; how long ago it
// last beat (by the database's clock). Refreshed every 5 s. One row per worker the history
// knows (not per execution), so its size does not grow with the executions.
import { duration, ErrorLine, graphql, html, Link, useQuery } from './shared.js';

const LIVE_MS = 5_000;
const WORKERS = `query Workers { workers { id status alive capacity inFlight actions runtimes host pid startedAt heartbeatAgeMs lastHeartbeatAt statusReason started completed failed timedOut cancelled } }`;

/** What an operator calls it: alive and draining are the worker's word, lost is liveness's. */
export function conditionOf(w) {
  if (w.status === 'stopped') return 'stopped';
  if (!w.alive) return w.status === 'unknown' ? 'unknown' : 'lost';
  return w.status === 'draining' ? 'draining' : 'alive';
}

function Load({ inFlight, capacity }) {
  const share = capacity ? Math.min(1, inFlight / capacity) : 0;
  return html`<div class="load" title=${`${inFlight} of ${capacity ?? '?'} slots busy`}>
    <div class="load-bar" aria-hidden="true"><span style=${{ width: `${Math.round(share * 100)}%` }}></span></div>
    <span class="num">${inFlight} / ${capacity ?? '—'}</span>
  </div>`;
}

export function WorkersView() {
  const workers = useQuery(() => graphql(WORKERS), 'workers', { pollMs: LIVE_MS });
  const list = workers.data?.workers ?? [];
  const counts = list.reduce((c, w) => ({ ...c, [conditionOf(w)]: (c[conditionOf(w)] ?? 0) + 1 }), {});
  return html`<section class="view" aria-labelledby="workers-title">
    <div class="view-head">
      <h1 id="workers-title">Workers</h1>
      <p class="muted" data-testid="worker-counts">${['alive', 'draining', 'lost', 'stopped'].map((k) => html`<span class="count"><span class=${`badge badge--w-${k}`}>${k}</span> ${counts[k] ?? 0}</span>`)}</p>
    </div>
    <${ErrorLine} error=${workers.error} />
    <div class="table-wrap">
      <table class="list" data-testid="workers-table">
        <thead><tr><th>Worker</th><th>Condition</th><th>Load</th><th>Actions offered</th><th class="num">Last heartbeat</th><th>Host</th><th class="num">Completed</th><th class="num">Failed</th></tr></thead>
        <tbody>
          ${list.map((w) => {
            const condition = conditionOf(w);
            return html`<tr data-testid="worker-row" data-id=${w.id} data-condition=${condition}>
              <td><${Link} to=${{ view: 'executions', worker: w.id }} title="Its executions">${w.id}</${Link}></td>
              <td><span class=${`badge badge--w-${condition}`} title=${w.statusReason ?? ''}>${condition}</span></td>
              <td><${Load} inFlight=${w.inFlight} capacity=${w.capacity} /></td>
              <td><div class="actions-cell">${w.actions.map((a) => html`<${Link} to=${{ view: 'actions', action: a }} class="chip">${a}</${Link}>`)}</div></td>
              <td class="num" data-testid="heartbeat-age">${w.heartbeatAgeMs === null ? html`<span class="muted">none</span>` : `${duration(w.heartbeatAgeMs)} ago`}</td>
              <td class="muted">${w.host ?? '—'}${w.pid ? ` · pid ${w.pid}` : ''}</td>
              <td class="num">${w.completed}</td>
              <td class="num">${w.failed + w.timedOut}</td>
            </tr>`;
          })}
        </tbody>
      </table>
      ${!workers.loading && !workers.error && list.length === 0 && html`<p class="hint">No worker has started yet.</p>`}
    </div>
  </section>`;
}
