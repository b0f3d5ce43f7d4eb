// Workflows: the list (25 a page by cursor, newest first) and one workflow's DAG, each step
// coloured by status and a link to its execution, live while it runs, with a cancel button
// (a mutation: the admin token only, after a confirmation).
import { useEffect, useState } from './vendor/hooks.mjs';
import { Forbidden } from './graphql.js';
import { Badge, Confirm, ErrorLine, graphql, html, Link, Pager, shortTime, useQuery, usePaging } from './shared.js';
import { Dag } from './dag.js';

const PAGE_SIZE = 25;
const LIVE_MS = 2_000;
const LIST_LIVE_MS = 5_000;
const LIST = `query Workflows($after: String) {
  workflows(first: ${PAGE_SIZE}, after: $after) {
    edges { node { id startedAt lastStepAt executions running completed failed cancelled workflow { name status steps { id } } } }
    pageInfo { hasNextPage endCursor }
  }
}`;
const WORKFLOW = `query Workflow($id: ID!) {
  workflow(id: $id) { id name status onFailure startedAt finishedAt reason cancelReason failedSteps
    steps { id action dependsOn status executionId execution { status runMs } error } }
}`;
const CANCEL = `mutation CancelWorkflow($id: ID!) { cancelWorkflow(id: $id, reason: "cancelled from the console") { outcome status message } }`;
const ENDED = new Set(['Completed', 'Failed', 'Cancelled']);

export function WorkflowsView({ params }) {
  const paging = usePaging(params);
  const list = useQuery(() => graphql(LIST, { after: paging.after }), `wf:${paging.after}`, { pollMs: paging.page === 1 ? LIST_LIVE_MS : undefined });
  const edges = list.data?.workflows.edges ?? [];
  return html`<section class="view" aria-labelledby="workflows-title">
    <div class="view-head"><h1 id="workflows-title">Workflows</h1></div>
    <${ErrorLine} error=${list.error} />
    <div class="table-wrap">
      <table class="list" data-testid="workflows-table">
        <thead><tr><th>Workflow</th><th>Name</th><th>Status</th><th class="num">Steps run</th><th class="num">Running</th><th class="num">Completed</th><th class="num">Failed</th><th>Started</th></tr></thead>
        <tbody>
          ${edges.map(
            ({ node }) => html`<tr data-testid="workflow-row" data-id=${node.id}>
              <td><${Link} to=${{ workflow: node.id }}>${node.id}</${Link}></td>
              <td>${node.workflow?.name ?? html`<span class="muted">—</span>`}</td>
              <td>${node.workflow ? html`<${Badge} status=${node.workflow.status} />` : html`<span class="muted">no stream</span>`}</td>
              <td class="num">${node.executions}${node.workflow ? ` / ${node.workflow.steps.length}` : ''}</td>
              <td class="num">${node.running}</td>
              <td class="num">${node.completed}</td>
              <td class="num">${node.failed}</td>
              <td>${shortTime(node.startedAt)}</td>
            </tr>`,
          )}
        </tbody>
      </table>
      ${!list.loading && !list.error && edges.length === 0 && html`<p class="hint">No workflow has run yet.</p>`}
    </div>
    ${list.data && html`<${Pager} paging=${paging} pageInfo=${list.data.workflows.pageInfo} />`}
  </section>`;
}

function CancelButton({ workflow, onDone }) {
  const [asking, setAsking] = useState(false);
  const [outcome, setOutcome] = useState({});
  const cancel = async () => {
    setAsking(false);
    try {
      const r = await graphql(CANCEL, { id: workflow.id });
      setOutcome({ done: r.cancelWorkflow.message });
      onDone();
    } catch (error) {
      setOutcome({ error: error instanceof Forbidden ? new Error(`Refused: ${error.message}`) : error });
    }
  };
  if (!outcome.done && (ENDED.has(workflow.status) || workflow.status === 'Cancelling')) return null;
  return html`<div class="cancel-box">
    ${outcome.done && html`<p role="status" class="ok" data-testid="cancel-outcome">${outcome.done}</p>`}
    <${ErrorLine} error=${outcome.error} />
    ${asking
      ? html`<${Confirm} question=${`Cancel workflow ${workflow.id}? No more steps start and the running ones are cancelled.`} confirmLabel="Cancel the workflow" onConfirm=${cancel} onCancel=${() => setAsking(false)} />`
      : !outcome.done && html`<button type="button" class="danger" onClick=${() => setAsking(true)} data-testid="workflow-cancel">Cancel workflow…</button>`}
  </div>`;
}

/** The view for `?workflow=<id>`. */
export function WorkflowPage({ params }) {
  const id = params.get('workflow');
  const [ended, setEnded] = useState(false);
  const result = useQuery(() => graphql(WORKFLOW, { id }), id, { pollMs: ended ? undefined : LIVE_MS });
  const workflow = result.data?.workflow;
  useEffect(() => {
    if (workflow && ENDED.has(workflow.status)) setEnded(true);
  }, [workflow?.status]);
  return html`<section class="view" aria-labelledby="workflow-title">
    <${ErrorLine} error=${result.error} />
    ${result.data && !workflow && html`<p class="hint" role="status">No workflow ${id}.</p>`}
    ${workflow &&
    html`<header class="execution-head">
        <div>
          <h1 id="workflow-title">${workflow.name ?? workflow.id}</h1>
          <p class="muted"><code>${workflow.id}</code> · ${workflow.onFailure} · started ${shortTime(workflow.startedAt)}${workflow.finishedAt ? ` · finished ${shortTime(workflow.finishedAt)}` : ''}${' · '}<${Link} to=${{ view: 'executions', workflow: workflow.id }}>its executions</${Link}></p>
        </div>
        <div class="execution-status"><${Badge} status=${workflow.status} />${!ENDED.has(workflow.status) && html`<span class="live-dot" title="live"></span>`}</div>
        ${workflow.reason && html`<p class="error-box" role="note"><strong>${workflow.status === 'Failed' ? 'Failed' : 'Reason'}:</strong> ${workflow.reason}</p>`}
      </header>
      <section class="panel" aria-label="Steps">
        <${Dag} steps=${workflow.steps} />
        <p class="legend-row muted">${['Pending', 'Scheduled', 'Running', 'Completed', 'Failed', 'Cancelled', 'Skipped'].map((s) => html`<span class=${`swatch swatch--${s}`}></span>${s} `)}</p>
      </section>
      <${CancelButton} workflow=${workflow} onDone=${result.reload} />`}
  </section>`;
}
