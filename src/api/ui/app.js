// Baton's operator console at /ui: executions, workflows, schedules, workers, actions and dead
// letters, each on the GraphQL API, and one execution's timeline. The address is the page's
// state (?view=…, ?execution=<id>&revision=<n>, ?workflow=<id>, ?schedule=<id>), so any view
// can be linked to; the views live one per module.
import { render } from './vendor/preact.mjs';
import { useEffect, useState } from './vendor/hooks.mjs';
import { saveToken } from './graphql.js';
import { ActionsView } from './actions.js';
import { DeadLettersView } from './dead-letters.js';
import { TimelinePage } from './execution-view.js';
import { ExecutionsView } from './executions.js';
import { SchedulePage } from './schedule-view.js';
import { SchedulesView } from './schedules.js';
import { html, Link, navigate, onTokenRequired, readParams, tokenChanged, useAccess } from './shared.js';
import { WorkersView } from './workers.js';
import { WorkflowPage, WorkflowsView } from './workflows.js';

// `scoped`: a token limited to namespaces may read it (the API answers the rest FORBIDDEN to one).
const VIEWS = [
  { id: 'executions', label: 'Executions', View: ExecutionsView, scoped: true },
  { id: 'workflows', label: 'Workflows', View: WorkflowsView },
  { id: 'schedules', label: 'Schedules', View: SchedulesView },
  { id: 'workers', label: 'Workers', View: WorkersView },
  { id: 'actions', label: 'Actions', View: ActionsView },
  { id: 'dead-letters', label: 'Dead letters', View: DeadLettersView },
];

/**
 * Which view the address names: an execution by id, else ?view= (where `workflow` is a filter:
 * `?view=executions&workflow=<id>` lists that workflow's executions), else a workflow or a
 * schedule by id, else the executions. `id` is the one page shown (it keys the page).
 */
function routeOf(params) {
  if (params.get('execution')) return { nav: 'executions', Page: TimelinePage, id: params.get('execution'), scoped: true };
  const view = VIEWS.find((v) => v.id === params.get('view'));
  if (view) return { nav: view.id, Page: view.View, id: '', scoped: view.scoped === true };
  if (params.get('workflow')) return { nav: 'workflows', Page: WorkflowPage, id: params.get('workflow'), scoped: false };
  if (params.get('schedule')) return { nav: 'schedules', Page: SchedulePage, id: params.get('schedule'), scoped: false };
  return { nav: VIEWS[0].id, Page: VIEWS[0].View, id: '', scoped: true };
}

/** A view a namespace token may not read, said instead of asking the API for it. */
const NotForThisToken = ({ label, namespaces }) =>
  html`<p class="error" role="alert" data-testid="not-for-this-token">This token is limited to namespace${namespaces.length === 1 ? '' : 's'} ${namespaces.join(', ')}: ${label} need a token for every namespace (the admin or read-only token).</p>`;

function TokenForm({ reason, onSave }) {
  const [token, setToken] = useState('');
  const submit = (e) => {
    e.preventDefault();
    onSave(token.trim());
  };
  return html`<form class="token" onSubmit=${submit} data-testid="token-form">
    <p role="alert">${reason}: paste a Baton API token (kept for this tab only). The read-only token shows everything; changes (cancel, retry, delete, pause…) need the admin token.</p>
    <label for="token">API token</label>
    <input id="token" type="password" autocomplete="off" value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
    <button type="submit">Use token</button>
  </form>`;
}

/** The search box: an execution id opens its timeline, a workflow id its workflow (the timeline page finds it is one); `key=value` (no id has a `=`) lists the executions with that tag. */
function Finder() {
  const [value, setValue] = useState('');
  const submit = (e) => {
    e.preventDefault();
    const text = value.trim();
    if (!text) return;
    if (text.includes('=')) navigate({ view: 'executions', tag: text });
    else navigate({ execution: text });
  };
  return html`<form class="finder" role="search" onSubmit=${submit}>
    <label for="execution-id">Execution id, workflow id or tag</label>
    <input id="execution-id" type="search" placeholder="e.g. 0190c2d4-… or customer=c-42" spellcheck="false" value=${value}
      data-testid="execution-search" onInput=${(e) => setValue(e.currentTarget.value)} />
    <button type="submit" data-testid="execution-open">Open</button>
  </form>`;
}

function App() {
  const [params, setParams] = useState(readParams);
  const [tokenReason, setTokenReason] = useState(undefined);
  useEffect(() => {
    const onChange = () => setParams(readParams());
    addEventListener('popstate', onChange);
    addEventListener('baton:navigate', onChange);
    onTokenRequired(setTokenReason);
    return () => {
      removeEventListener('popstate', onChange);
      removeEventListener('baton:navigate', onChange);
    };
  }, []);
  const { nav, Page, id, scoped } = routeOf(params);
  const access = useAccess();
  const namespaces = access.data?.namespaces;
  useEffect(() => {
    document.title = `Baton · ${VIEWS.find((v) => v.id === nav).label}`;
  }, [nav]);
  const applyToken = (token) => {
    saveToken(token);
    setTokenReason(undefined);
    tokenChanged();
  };
  return html`
    <header class="top">
      <a class="brand" href="/ui">Baton <span>console</span></a>
      <nav class="tabs" aria-label="Views">
        ${VIEWS.map((v) => html`<${Link} to=${{ view: v.id }} class=${`tab ${nav === v.id ? 'tab--current' : ''}`} aria-current=${nav === v.id ? 'page' : undefined} data-testid=${`nav-${v.id}`}>${v.label}</${Link}>`)}
      </nav>
      <${Finder} />
      <a class="graphiql-link" href="/graphql">GraphiQL</a>
    </header>
    ${tokenReason && html`<${TokenForm} reason=${tokenReason} onSave=${applyToken} />`}
    <main class="page">
      ${scoped || access.error
        ? html`<${Page} key=${`${nav}:${id}`} params=${params} />`
        : access.loading && !access.data
          ? null
          : namespaces
            ? html`<${NotForThisToken} label=${VIEWS.find((v) => v.id === nav).label} namespaces=${namespaces} />`
            : html`<${Page} key=${`${nav}:${id}`} params=${params} />`}
    </main>
  `;
}

const root = document.getElementById('app');
root.replaceChildren(); // the "Loading…" placeholder: render() adds to what is there
render(html`<${App} />`, root);
