// The executions list: filters (status, action, worker, workflow, time range, stalled, tags), a page
// of 50 at a time by cursor (never the whole table), live while on the newest page, and each
// execution a link to its timeline, its tags chips that filter by them.
import { useState } from './vendor/hooks.mjs';
import { Badge, duration, errorMessage, ErrorLine, graphql, html, Link, navigate, Pager, shortId, shortTime, useAccess, useQuery, usePaging } from './shared.js';
import { parseTag, TagChips, tagsFilterOf, withTag } from './tags.js';

export const PAGE_SIZE = 50;
const LIVE_MS = 3_000;
const STATUSES = ['Requested', 'Scheduling', 'Scheduled', 'Running', 'Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned'];
const LIST = `query Executions($filter: ExecutionFilter, $after: String) {
  executions(filter: $filter, first: ${PAGE_SIZE}, after: $after) {
    edges { node { id status action workerId attempt requestedAt finishedAt runMs stalled workflowId error tags } }
    pageInfo { hasNextPage endCursor }
  }
}`;
const ACTIONS = `query ActionNames { actionStats { action } }`;

/** The URL's filter parameters → the API's ExecutionFilter (times as ISO). */
export function filterOf(params) {
  const filter = {};
  if (params.get('status')) filter.status = params.get('status');
  if (params.get('action')) filter.action = params.get('action');
  if (params.get('worker')) filter.workerId = params.get('worker');
  if (params.get('workflow')) filter.workflowId = params.get('workflow');
  if (params.get('since')) filter.since = params.get('since');
  if (params.get('until')) filter.until = params.get('until');
  if (params.get('stalled') === 'true') filter.stalled = true;
  const { tags } = tagsFilterOf(params);
  if (tags) filter.tags = tags;
  return filter;
}

const FIELDS = ['status', 'action', 'worker', 'workflow', 'since', 'until', 'stalled'];
/** The executions view's address with these tags (the other filters kept). */
const addressWith = (params, tags) => ({ view: 'executions', ...Object.fromEntries(FIELDS.map((k) => [k, params.get(k)])), tag: tags });

// <input type="datetime-local"> speaks local time without a zone; the URL and the API, ISO.
const toLocalInput = (iso) => {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const fromLocalInput = (value) => (value ? new Date(value).toISOString() : '');

function Filters({ params }) {
  const [form, setForm] = useState(() => ({
    status: params.get('status') ?? '',
    action: params.get('action') ?? '',
    worker: params.get('worker') ?? '',
    workflow: params.get('workflow') ?? '',
    since: toLocalInput(params.get('since')),
    until: toLocalInput(params.get('until')),
    stalled: params.get('stalled') === 'true',
    tags: params.getAll('tag'),
    tag: '',
  }));
  const [tagProblem, setTagProblem] = useState(undefined);
  // The action names offered come from actionStats, which a namespace token may not read (they span namespaces).
  const access = useAccess().data;
  const actions = useQuery(() => graphql(ACTIONS), access && !access.namespaces ? 'actions' : null);
  const set = (key) => (e) => setForm({ ...form, [key]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const go = (tags) => {
    const { tag, ...rest } = form;
    navigate({ view: 'executions', ...rest, tags: undefined, since: fromLocalInput(form.since), until: fromLocalInput(form.until), stalled: form.stalled ? 'true' : '', tag: tags });
  };
  // The tag field's text joins the tags on Apply (Enter in it applies too).
  const apply = (e) => {
    e.preventDefault();
    const typed = form.tag.trim();
    if (typed) {
      const parsed = parseTag(typed);
      if ('problem' in parsed) return setTagProblem(parsed.problem);
    }
    go(typed ? withTag(form.tags, typed) : form.tags);
  };
  const clear = () => {
    setForm({ status: '', action: '', worker: '', workflow: '', since: '', until: '', stalled: false, tags: [], tag: '' });
    navigate({ view: 'executions' });
  };
  return html`<form class="filters" onSubmit=${apply} aria-label="Filter executions" data-testid="execution-filters">
    <label>Status
      <select value=${form.status} onChange=${set('status')} data-testid="filter-status">
        <option value="">any</option>
        ${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></label>
    <label>Action
      <input list="action-names" value=${form.action} onInput=${set('action')} placeholder="any" spellcheck="false" data-testid="filter-action" />
      <datalist id="action-names">${(actions.data?.actionStats ?? []).map((a) => html`<option value=${a.action} />`)}</datalist></label>
    <label>Worker <input value=${form.worker} onInput=${set('worker')} placeholder="any" spellcheck="false" data-testid="filter-worker" /></label>
    <label>Workflow <input value=${form.workflow} onInput=${set('workflow')} placeholder="any" spellcheck="false" data-testid="filter-workflow" /></label>
    <label>Requested from <input type="datetime-local" value=${form.since} onInput=${set('since')} data-testid="filter-since" /></label>
    <label>until <input type="datetime-local" value=${form.until} onInput=${set('until')} data-testid="filter-until" /></label>
    <label>Tag <input value=${form.tag} onInput=${set('tag')} placeholder="key=value" spellcheck="false" data-testid="filter-tag"
      aria-describedby=${tagProblem ? 'tag-problem' : undefined} aria-invalid=${tagProblem ? 'true' : undefined} /></label>
    ${form.tags.length > 0 && html`<div class="filter-tags" aria-label="Tags every execution must have">
      ${form.tags.map((t) => html`<span class="chip tag" data-testid="filter-tag-chip" data-tag=${t}>${t}
        <button type="button" class="chip-remove" aria-label=${`Remove tag ${t}`} onClick=${() => go(form.tags.filter((x) => x !== t))} data-testid="filter-tag-remove">×</button></span>`)}
    </div>`}
    <label class="check"><input type="checkbox" checked=${form.stalled} onChange=${set('stalled')} data-testid="filter-stalled" /> stalled only</label>
    <div class="filter-buttons">
      <button type="submit" class="primary" data-testid="filter-apply">Apply</button>
      <button type="button" onClick=${clear}>Clear</button>
    </div>
    ${tagProblem && html`<p class="error filter-problem" id="tag-problem" role="alert">${tagProblem}</p>`}
  </form>`;
}

function Row({ node, params }) {
  const message = errorMessage(node.error);
  return html`<tr data-testid="execution-row" data-id=${node.id}>
    <td><${Link} to=${{ execution: node.id }} class="mono" title=${node.id}>${shortId(node.id)}</${Link}></td>
    <td>${node.action}</td>
    <td><${Badge} status=${node.status} />${node.stalled && html` <span class="badge badge--stalled">stalled</span>`}</td>
    <td>${node.workerId ? html`<${Link} to=${{ view: 'executions', worker: node.workerId }}>${node.workerId}</${Link}>` : html`<span class="muted">—</span>`}</td>
    <td class="num">${node.attempt}</td>
    <td>${shortTime(node.requestedAt)}</td>
    <td class="num">${duration(node.runMs)}</td>
    <td class="cell-tags"><${TagChips} tags=${node.tags} to=${(text) => addressWith(params, withTag(params.getAll('tag'), text))} /></td>
    <td class="cell-error" title=${message ?? ''}>${message ?? (node.workflowId ? html`<span class="muted">workflow </span><${Link} to=${{ workflow: node.workflowId }}>${node.workflowId}</${Link}>` : '')}</td>
  </tr>`;
}

export function ExecutionsView({ params }) {
  const filter = filterOf(params);
  const filterKey = JSON.stringify(filter);
  const tagProblems = tagsFilterOf(params).problems;
  const paging = usePaging(params);
  const [live, setLive] = useState(true);
  const livePoll = live && paging.page === 1 ? LIVE_MS : undefined;
  // A tag that is not key=value lists nothing (as a tag the API refuses): the list without it would look filtered.
  const list = useQuery(() => graphql(LIST, { filter, after: paging.after }), tagProblems.length ? null : `${filterKey}:${paging.after}`, { pollMs: livePoll });
  const edges = list.data?.executions.edges ?? [];
  return html`<section class="view" aria-labelledby="executions-title">
    <div class="view-head">
      <h1 id="executions-title">Executions</h1>
      <label class="check live" title="Refresh the newest page every few seconds">
        <input type="checkbox" checked=${live} onChange=${(e) => setLive(e.currentTarget.checked)} data-testid="live-toggle" />
        live${livePoll ? html` <span class="live-dot" aria-hidden="true"></span>` : ''}</label>
    </div>
    <${Filters} key=${filterKey} params=${params} />
    <${ErrorLine} error=${tagProblems.length ? new Error(tagProblems.join('; ')) : list.error} />
    <div class="table-wrap">
      <table class="list" data-testid="executions-table">
        <thead><tr><th>Id</th><th>Action</th><th>Status</th><th>Worker</th><th class="num">Attempt</th><th>Requested</th><th class="num">Run time</th><th>Tags</th><th>Error / workflow</th></tr></thead>
        <tbody>${edges.map(({ node }) => html`<${Row} key=${node.id} node=${node} params=${params} />`)}</tbody>
      </table>
      ${!list.loading && !list.error && !tagProblems.length && edges.length === 0 && html`<p class="hint" data-testid="executions-empty">No executions${filterKey !== '{}' ? ' match these filters' : ' yet'}.</p>`}
    </div>
    ${list.data && html`<${Pager} paging=${paging} pageInfo=${list.data.executions.pageInfo} />`}
  </section>`;
}
