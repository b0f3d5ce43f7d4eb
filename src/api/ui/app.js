// Baton's web timeline: find an execution, scrub through its revisions, and see the state,
// owner and context at each one beside the statechart with the path it took.
// The whole history loads once; scrubbing is local. The URL (?execution=…&revision=…) is the
// page's state, so any view can be linked to.
import { h, render } from './vendor/preact.mjs';
import { useCallback, useEffect, useMemo, useState } from './vendor/hooks.mjs';
import htm from './vendor/htm.mjs';
import { graphql, saveToken, TokenRequired } from './graphql.js';
import { StatePanel } from './state-panel.js';
import { pathTaken, Statechart } from './statechart.js';
import { Timeline } from './timeline.js';

const html = htm.bind(h);

// 200 steps, each with its event data and context (each at most BATON_API_MAX_VALUE_BYTES,
// 16 KiB, inside a list), stay within the 8 MiB response budget; 1,000 would not.
const HISTORY_PAGE = 200;
const RECENT = `query Recent { executions(first: 20) { edges { node { id status action requestedAt } } } }`;
const STEP_FIELDS = 'revision eventId type by recordedAt occurredAt data machineVersion stateBefore state owner attempt context changed';
const TIMELINE = `query Timeline($id: ID!) {
  execution(id: $id) { id status action requestedAt archived { archivedAt archive } history(limit: ${HISTORY_PAGE}) { ${STEP_FIELDS} } }
  executionMachine { version initial states { name final } transitions { from to event } }
}`;
const MORE_HISTORY = `query MoreHistory($id: ID!, $from: Int!) {
  execution(id: $id) { history(fromRevision: $from, limit: ${HISTORY_PAGE}) { ${STEP_FIELDS} } }
}`;

// One step's event data and context whole: inside `history` a value larger than the API's value
// limit comes as a `$truncated` marker; outside a list (stateAt) it comes whole.
const WHOLE_STEP = `query WholeStep($id: ID!, $revision: Int!) {
  execution(id: $id) { stateAt(revision: $revision) { context event { data } } }
}`;
const isTruncated = (value) => value !== null && typeof value === 'object' && value.$truncated === true;

/** The step as shown: with its data and context fetched whole when the history cut them short. */
function useWholeStep(executionId, step) {
  const [whole, setWhole] = useState(undefined);
  const cut = step !== undefined && (isTruncated(step.context) || isTruncated(step.data));
  useEffect(() => {
    setWhole(undefined);
    if (!cut) return;
    let current = true;
    graphql(WHOLE_STEP, { id: executionId, revision: step.revision }).then(
      (data) => current && setWhole(data.execution?.stateAt ?? undefined),
      () => undefined, // too large even alone: the markers stay, and say how large
    );
    return () => {
      current = false;
    };
  }, [executionId, step?.revision, cut]);
  return cut && whole ? { ...step, context: whole.context, data: whole.event.data } : step;
}

/** The execution with its whole history (fetched a page at a time), and the machine. */
async function loadTimeline(id) {
  const data = await graphql(TIMELINE, { id });
  const history = data.execution?.history;
  for (let page = history; page?.length === HISTORY_PAGE; ) {
    page = (await graphql(MORE_HISTORY, { id, from: page.at(-1).revision + 1 })).execution?.history ?? [];
    history.push(...page);
  }
  return data;
}

/** @returns {{ id: string, revision: number | undefined }} */
function readLocation() {
  const params = new URLSearchParams(location.search);
  const revision = Number.parseInt(params.get('revision') ?? '', 10);
  return { id: params.get('execution')?.trim() ?? '', revision: Number.isNaN(revision) ? undefined : revision };
}

function writeLocation(id, revision, { push = false } = {}) {
  const params = new URLSearchParams();
  if (id) params.set('execution', id);
  if (id && revision !== undefined) params.set('revision', String(revision));
  const url = `${location.pathname}${params.size ? `?${params}` : ''}`;
  if (url === `${location.pathname}${location.search}`) return;
  if (push) history.pushState(null, '', url);
  else history.replaceState(null, '', url);
}

/** Run a query whenever `key` changes; a TokenRequired error asks the page for a token. */
function useQuery(run, key, onTokenRequired) {
  const [result, setResult] = useState({ loading: false });
  useEffect(() => {
    if (key === null) return setResult({ loading: false });
    let current = true;
    setResult((r) => ({ ...r, loading: true, error: undefined }));
    run().then(
      (data) => current && setResult({ loading: false, data }),
      (error) => {
        if (!current) return;
        if (error instanceof TokenRequired) onTokenRequired(error.message);
        setResult({ loading: false, error });
      },
    );
    return () => {
      current = false;
    };
  }, [key]);
  return result;
}

function TokenForm({ reason, onSave }) {
  const [token, setToken] = useState('');
  const submit = (e) => {
    e.preventDefault();
    onSave(token.trim());
  };
  return html`<form class="token" onSubmit=${submit} data-testid="token-form">
    <p role="alert">${reason}: paste a Baton API token (kept for this tab only).</p>
    <label for="token">API token</label>
    <input id="token" type="password" autocomplete="off" value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
    <button type="submit">Use token</button>
  </form>`;
}

function Finder({ initial, onOpen }) {
  const [value, setValue] = useState(initial);
  useEffect(() => setValue(initial), [initial]);
  const submit = (e) => {
    e.preventDefault();
    if (value.trim()) onOpen(value.trim());
  };
  return html`<form class="finder" role="search" onSubmit=${submit}>
    <label for="execution-id">Execution id</label>
    <input id="execution-id" type="search" placeholder="e.g. 0190c2d4-…" spellcheck="false" value=${value}
      data-testid="execution-search" onInput=${(e) => setValue(e.currentTarget.value)} />
    <button type="submit" data-testid="execution-open">Open</button>
  </form>`;
}

function RecentList({ recent, selected, onOpen, onRefresh }) {
  const edges = recent.data?.executions.edges ?? [];
  return html`<nav class="recent" aria-labelledby="recent-title">
    <div class="recent-head">
      <h2 id="recent-title">Recent executions</h2>
      <button type="button" class="link" onClick=${onRefresh} aria-label="Refresh the list">Refresh</button>
    </div>
    ${recent.error && !(recent.error instanceof TokenRequired) && html`<p class="error">${recent.error.message}</p>`}
    ${!recent.loading && !recent.error && edges.length === 0 && html`<p class="muted">None yet.</p>`}
    <ul data-testid="recent-executions">
      ${edges.map(
        ({ node }) => html`<li>
          <button type="button" class=${`recent-item ${node.id === selected ? 'recent-item--selected' : ''}`}
            aria-current=${node.id === selected ? 'true' : undefined} onClick=${() => onOpen(node.id)} title=${node.id}>
            <span class="recent-action">${node.action}</span>
            <span class=${`badge badge--${node.status}`}>${node.status}</span>
            <span class="recent-id">${node.id.slice(0, 8)} · ${new Date(node.requestedAt).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' })}</span>
          </button>
        </li>`,
      )}
    </ul>
  </nav>`;
}

function ExecutionView({ execution, machine, revision, onSelect, onReload }) {
  const steps = execution.history;
  const step = useWholeStep(execution.id, steps[revision]);
  const before = useWholeStep(execution.id, steps[revision - 1]);
  const { taken, visited, last } = useMemo(() => pathTaken(steps, revision), [steps, revision]);
  if (!step) return html`<p class="hint">This execution has no events.</p>`;
  return html`<article class="execution" aria-labelledby="execution-title">
    <header class="execution-head">
      <div>
        <h1 id="execution-title">${execution.action}</h1>
        <p class="muted"><code data-testid="execution-id">${execution.id}</code> · requested ${new Date(execution.requestedAt).toLocaleString()}${execution.archived ? html` · <span data-testid="archived" title=${execution.archived.archive}>archived ${new Date(execution.archived.archivedAt).toLocaleString()}</span>` : ''}</p>
      </div>
      <div class="execution-status">
        <span class="muted">now</span> <span class=${`badge badge--${execution.status}`}>${execution.status}</span>
        <button type="button" onClick=${onReload}>Reload</button>
      </div>
    </header>
    <${Timeline} steps=${steps} revision=${revision} onSelect=${onSelect} />
    <section class="panel chart-panel" aria-labelledby="chart-title">
      <h2 id="chart-title">Statechart <span class="muted">machine ${machine.version}; the path up to revision ${revision}</span></h2>
      <${Statechart} machine=${machine} current=${step.state} taken=${taken} last=${last} visited=${visited} />
    </section>
    <div class="details">
      <${StatePanel} step=${step} before=${before} />
    </div>
  </article>`;
}

function App() {
  const [location_, setLocation] = useState(readLocation);
  const [tokenReason, setTokenReason] = useState(undefined);
  const [attempt, setAttempt] = useState(0); // bumped to refetch: a new token, Reload, Refresh
  const [recentAttempt, setRecentAttempt] = useState(0);
  const { id } = location_;

  useEffect(() => {
    const onPop = () => setLocation(readLocation());
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);

  const recent = useQuery(() => graphql(RECENT), `${attempt}:${recentAttempt}`, setTokenReason);
  const timeline = useQuery(() => loadTimeline(id), id ? `${attempt}:${id}` : null, setTokenReason);

  const execution = timeline.data?.execution;
  const last = execution ? execution.history.length - 1 : 0;
  const revision = Math.min(Math.max(location_.revision ?? last, 0), last);

  const open = useCallback((next) => {
    writeLocation(next, undefined, { push: true });
    setLocation({ id: next, revision: undefined });
  }, []);
  const select = useCallback(
    (next) => {
      writeLocation(id, next);
      setLocation({ id, revision: next });
    },
    [id],
  );
  const applyToken = (token) => {
    saveToken(token);
    setTokenReason(undefined);
    setAttempt((n) => n + 1);
  };

  return html`
    <header class="top">
      <a class="brand" href="/ui">Baton <span>timeline</span></a>
      <${Finder} initial=${id} onOpen=${open} />
    </header>
    ${tokenReason && html`<${TokenForm} reason=${tokenReason} onSave=${applyToken} />`}
    <div class="layout">
      <${RecentList} recent=${recent} selected=${id} onOpen=${open} onRefresh=${() => setRecentAttempt((n) => n + 1)} />
      <main>
        ${!id && html`<p class="hint">Pick an execution on the left, or paste its id above.</p>`}
        ${id && timeline.loading && execution?.id !== id && html`<p class="hint" aria-live="polite">Loading ${id}…</p>`}
        ${id && timeline.error && !(timeline.error instanceof TokenRequired) && html`<p class="error" role="alert">${timeline.error.message}</p>`}
        ${id && !timeline.loading && timeline.data && !execution && html`<p class="hint" role="status">No execution ${id} in the read model (yet: it appears once projected).</p>`}
        ${execution && execution.id === id && html`<${ExecutionView} execution=${execution} machine=${timeline.data.executionMachine}
          revision=${revision} onSelect=${select} onReload=${() => setAttempt((n) => n + 1)} />`}
      </main>
    </div>
  `;
}

const root = document.getElementById('app');
root.replaceChildren(); // the "Loading…" placeholder: render() adds to what is there
render(html`<${App} />`, root);
