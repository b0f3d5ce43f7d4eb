// One execution's timeline: its events, the revision slider, the statechart with the path taken
// (and a what-if fork on it), and the state and context at the selected revision. The whole
// history loads a page at a time once; scrubbing is local. While the execution is not final the
// page asks for its revision every 2 s and reloads the history when it moved.
import { useEffect, useMemo, useState } from './vendor/hooks.mjs';
import { TokenRequired } from './graphql.js';
import { askAccess, Badge, errorMessage, ErrorLine, graphql, html, Link, navigate, shortId, useQuery } from './shared.js';
import { StatePanel } from './state-panel.js';
import { TagChips } from './tags.js';
import { pathTaken, Statechart } from './statechart.js';
import { Timeline } from './timeline.js';
import { WhatIf } from './what-if.js';

// 200 steps, each with its event data and context (each at most BATON_API_MAX_VALUE_BYTES,
// 16 KiB, inside a list), stay within the 8 MiB response budget; 1,000 would not.
const HISTORY_PAGE = 200;
const LIVE_MS = 2_000;
const FINAL = new Set(['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned']);
/** Where the error is the outcome; elsewhere it is an earlier attempt's (the read model keeps the last one). */
const ENDED_BADLY = new Set(['Failed', 'TimedOut', 'Abandoned']);
const STEP_FIELDS = 'revision eventId type by recordedAt occurredAt data machineVersion stateBefore state owner attempt context changed';
const TIMELINE = `query Timeline($id: ID!) {
  execution(id: $id) { id revision status action requestedAt workflowId parentId workerId error tags archived { archivedAt archive } history(limit: ${HISTORY_PAGE}) { ${STEP_FIELDS} } }
  executionMachine { version initial states { name final } transitions { from to event } }
}`;
const MORE_HISTORY = `query MoreHistory($id: ID!, $from: Int!) {
  execution(id: $id) { history(fromRevision: $from, limit: ${HISTORY_PAGE}) { ${STEP_FIELDS} } }
}`;
const REVISION = `query Revision($id: ID!) { execution(id: $id) { revision status } }`;
const WORKFLOW = `query WorkflowOfId($id: ID!) { workflow(id: $id) { id } }`;

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

/** The workflow's id when `id` is a workflow's (the search box takes either), else undefined (also when the token may not read workflows). */
const workflowOf = async (id) => {
  const scoped = await askAccess().then((a) => a.namespaces !== null, () => true);
  return scoped ? undefined : graphql(WORKFLOW, { id }).then((data) => data.workflow?.id, () => undefined);
};

/** The execution with its whole history (fetched a page at a time), and the machine; with no such execution, `workflowId` when the id is a workflow's. */
async function loadTimeline(id) {
  let data;
  try {
    data = await graphql(TIMELINE, { id });
  } catch (error) {
    // Not an execution id at all ("id: must be an execution id"): a workflow's, perhaps.
    const workflowId = error instanceof TokenRequired ? undefined : await workflowOf(id);
    if (workflowId) return { workflowId };
    throw error;
  }
  if (!data.execution) data.workflowId = await workflowOf(id);
  const history = data.execution?.history;
  for (let page = history; page?.length === HISTORY_PAGE; ) {
    page = (await graphql(MORE_HISTORY, { id, from: page.at(-1).revision + 1 })).execution?.history ?? [];
    history.push(...page);
  }
  return data;
}

/** The revision the read model has now, while the execution is not final: the page reloads when it moves. */
function useLiveRevision(id, execution) {
  const live = execution != null && !FINAL.has(execution.status);
  const latest = useQuery(() => graphql(REVISION, { id }), live ? `live:${id}` : null, { pollMs: LIVE_MS });
  return live ? latest.data?.execution?.revision : undefined;
}

function Header({ execution }) {
  const message = errorMessage(execution.error);
  return html`<header class="execution-head">
    <div>
      <h1 id="execution-title">${execution.action}</h1>
      <p class="muted"><code data-testid="execution-id">${execution.id}</code> · requested ${new Date(execution.requestedAt).toLocaleString()}
        ${execution.workflowId && html` · workflow <${Link} to=${{ workflow: execution.workflowId }} data-testid="workflow-link">${execution.workflowId}</${Link}>`}
        ${execution.parentId && html` · parent <${Link} to=${{ execution: execution.parentId }} class="mono" data-testid="parent-link">${shortId(execution.parentId)}</${Link}>`}
        ${execution.archived && html` · <span data-testid="archived-at" title=${execution.archived.archive}>archived ${new Date(execution.archived.archivedAt).toLocaleString()}, read from its archive file</span>`}
      </p>
      ${Object.keys(execution.tags ?? {}).length > 0 && html`<p class="execution-tags"><span class="muted">tags</span> <${TagChips} tags=${execution.tags} to=${(text) => ({ view: 'executions', tag: [text] })} /></p>`}
    </div>
    <div class="execution-status">
      ${execution.archived && html`<span class="badge badge--archived" data-testid="archived" title=${`Archived by retention to ${execution.archived.archive}`}>archived</span>`}
      <span class="muted">now</span> <${Badge} status=${execution.status} />
    </div>
    ${message && html`<p class=${ENDED_BADLY.has(execution.status) ? 'error-box' : 'error-box error-box--earlier'} role="note" data-testid="execution-error">
      <strong>${ENDED_BADLY.has(execution.status) ? 'Error:' : 'An earlier attempt failed:'}</strong> ${message}</p>`}
  </header>`;
}

function ExecutionView({ execution, machine, revision, onSelect }) {
  const steps = execution.history;
  const step = useWholeStep(execution.id, steps[revision]);
  const before = useWholeStep(execution.id, steps[revision - 1]);
  const { taken, visited, last } = useMemo(() => pathTaken(steps, revision), [steps, revision]);
  const [fork, setFork] = useState(undefined);
  useEffect(() => setFork(undefined), [execution.id, revision]);
  if (!step) return html`<p class="hint">This execution has no events.</p>`;
  return html`<article class="execution" aria-labelledby="execution-title">
    <${Header} execution=${execution} />
    <div class="execution-main">
      <${Timeline} steps=${steps} revision=${revision} onSelect=${onSelect} />
      <section class="panel chart-panel" aria-labelledby="chart-title">
        <h2 id="chart-title">Statechart <span class="muted">machine ${machine.version}; the path up to revision ${revision}${fork ? ', and the what-if (dashed)' : ''}</span></h2>
        <${Statechart} machine=${machine} current=${step.state} taken=${taken} last=${last} visited=${visited} fork=${fork} />
        <${WhatIf} executionId=${execution.id} revision=${revision} onFork=${setFork} />
      </section>
    </div>
    <div class="details">
      <${StatePanel} step=${step} before=${before} />
    </div>
  </article>`;
}

/** The view for `?execution=<id>&revision=<n>`. */
export function TimelinePage({ params }) {
  const id = params.get('execution')?.trim() ?? '';
  const parsed = Number.parseInt(params.get('revision') ?? '', 10);
  const [reloads, setReloads] = useState(0);
  const timeline = useQuery(() => loadTimeline(id), id ? `${id}:${reloads}` : null);
  const execution = timeline.data?.execution;
  const liveRevision = useLiveRevision(id, execution);
  useEffect(() => {
    if (execution && liveRevision !== undefined && liveRevision !== execution.revision) setReloads((n) => n + 1);
  }, [liveRevision]);
  // A workflow's id: show the workflow (in place of this address, so Back skips it).
  const workflowId = execution ? undefined : timeline.data?.workflowId;
  useEffect(() => {
    if (workflowId) navigate({ workflow: workflowId }, { replace: true });
  }, [workflowId]);
  // Not projected yet (a link opened right after its submit): ask again until it is.
  const notYet = !timeline.loading && timeline.data != null && !execution && !workflowId;
  useEffect(() => {
    if (!notYet) return;
    const timer = setTimeout(() => setReloads((n) => n + 1), LIVE_MS);
    return () => clearTimeout(timer);
  }, [notYet, reloads]);
  const last = execution ? execution.history.length - 1 : 0;
  const revision = Math.min(Math.max(Number.isNaN(parsed) ? last : parsed, 0), last);
  const select = (next) => navigate({ execution: id, revision: next }, { replace: true });
  return html`
    ${timeline.loading && execution?.id !== id && html`<p class="hint" aria-live="polite">Loading ${id}…</p>`}
    <${ErrorLine} error=${timeline.error} />
    ${!timeline.loading && timeline.data && !execution && !workflowId && html`<p class="hint" role="status">No execution ${id} in the read model (yet: it appears once projected).</p>`}
    ${!timeline.loading && workflowId && html`<p class="hint" role="status">${id} is a workflow: <${Link} to=${{ workflow: workflowId }}>open it</${Link}>.</p>`}
    ${execution && execution.id === id && html`<${ExecutionView} execution=${execution} machine=${timeline.data.executionMachine} revision=${revision} onSelect=${select} />`}
  `;
}
