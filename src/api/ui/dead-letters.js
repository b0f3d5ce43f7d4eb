// Dead letters: work messages no worker acknowledged, oldest first, 25 a page by cursor. Each
// can be shown, retried (published again to its worker) or deleted, after a confirmation;
// both are mutations, which the API refuses to a read-only token (the page says so).
import { useState } from './vendor/hooks.mjs';
import { Forbidden } from './graphql.js';
import { Badge, Confirm, ErrorLine, graphql, html, Link, Pager, shortId, shortTime, useMayChange, useQuery, usePaging } from './shared.js';

const PAGE_SIZE = 25;
const LIST = `query DeadLetters($after: String) {
  deadLetters(first: ${PAGE_SIZE}, after: $after) {
    edges { node { messageId executionId workerId runtime action attempt deliveries reason deadLetteredAt publishedAt standing standingReason execution { id status } } }
    pageInfo { hasNextPage endCursor }
  }
}`;
const RETRY = `mutation Retry($id: ID!) { retryDeadLetter(messageId: $id) { messageId executionId } }`;
const DELETE = `mutation Delete($id: ID!) { deleteDeadLetter(messageId: $id) { messageId executionId } }`;

const ACTIONS = {
  retry: { mutation: RETRY, label: 'Retry', question: (d) => `Publish ${d.action} (attempt ${d.attempt}) to worker ${d.workerId} again?`, done: 'published again' },
  delete: { mutation: DELETE, label: 'Delete', question: (d) => `Delete this dead letter of ${d.action} for good? It is not published again.`, done: 'deleted' },
};

function Details({ letter, onDone }) {
  const [asking, setAsking] = useState(undefined);
  const [outcome, setOutcome] = useState({});
  const mayChange = useMayChange();
  const act = async (kind) => {
    setAsking(undefined);
    setOutcome({ running: kind });
    try {
      await graphql(ACTIONS[kind].mutation, { id: letter.messageId });
      setOutcome({ done: `Dead letter ${ACTIONS[kind].done}.` });
      onDone();
    } catch (error) {
      setOutcome({ error: error instanceof Forbidden ? new Error(`Refused: ${error.message}`) : error });
    }
  };
  return html`<div class="dead-letter-details" data-testid="dead-letter-details">
    <dl class="facts">
      <dt>Message</dt><dd class="mono">${letter.messageId}</dd>
      <dt>Execution</dt><dd><${Link} to=${{ execution: letter.executionId }} class="mono">${letter.executionId}</${Link}>
        ${letter.execution ? html` <${Badge} status=${letter.execution.status} />` : html` <span class="muted">(not in the read model)</span>`}</dd>
      <dt>Worker</dt><dd>${letter.workerId} <span class="muted">(${letter.runtime})</span></dd>
      <dt>Attempt</dt><dd>${letter.attempt}</dd>
      <dt>Why</dt><dd>${letter.reason}</dd>
      <dt>Deliveries</dt><dd>${letter.deliveries}</dd>
      <dt>Published</dt><dd>${shortTime(letter.publishedAt)}</dd>
      <dt>Dead-lettered</dt><dd>${shortTime(letter.deadLetteredAt)}</dd>
      <dt>Standing</dt><dd>${letter.standing}: ${letter.standingReason}</dd>
    </dl>
    ${outcome.done && html`<p role="status" class="ok" data-testid="dead-letter-outcome">${outcome.done}</p>`}
    <${ErrorLine} error=${outcome.error} />
    ${!outcome.done &&
    (asking
      ? html`<${Confirm} question=${ACTIONS[asking].question(letter)} confirmLabel=${ACTIONS[asking].label} onConfirm=${() => act(asking)} onCancel=${() => setAsking(undefined)} />`
      : html`<div class="buttons">
          <button type="button" onClick=${() => setAsking('retry')} disabled=${outcome.running} data-testid="dead-letter-retry">Retry…</button>
          <button type="button" class="danger" onClick=${() => setAsking('delete')} disabled=${outcome.running} data-testid="dead-letter-delete">Delete…</button>
          ${mayChange === false && html`<span class="muted">needs the admin token</span>`}
        </div>`)}
  </div>`;
}

export function DeadLettersView({ params }) {
  const paging = usePaging(params);
  const list = useQuery(() => graphql(LIST, { after: paging.after }), `dl:${paging.after}`);
  const [open, setOpen] = useState(undefined);
  const edges = list.data?.deadLetters.edges ?? [];
  return html`<section class="view" aria-labelledby="dead-letters-title">
    <div class="view-head">
      <h1 id="dead-letters-title">Dead letters</h1>
      <button type="button" onClick=${list.reload}>Refresh</button>
    </div>
    <p class="muted">Work messages the transport gave up on after its deliveries; the executor ended their executions. Oldest first; one whose execution has moved on since (a later attempt, or ended otherwise) is Settled, not dead work. Retry publishes one again to its worker while its execution has not ended (once it has, it is refused: submit the work again); delete removes it for good.</p>
    <${ErrorLine} error=${list.error} />
    <div class="table-wrap">
      <table class="list" data-testid="dead-letters-table">
        <thead><tr><th>Action</th><th>Execution</th><th>Worker</th><th class="num">Attempt</th><th>Why</th><th>Dead-lettered</th><th>Standing</th><th></th></tr></thead>
        <tbody>
          ${edges.map(({ node }) => html`
            <tr data-testid="dead-letter-row" data-id=${node.messageId}>
              <td>${node.action}</td>
              <td><${Link} to=${{ execution: node.executionId }} class="mono">${shortId(node.executionId)}</${Link}></td>
              <td>${node.workerId}</td>
              <td class="num">${node.attempt}</td>
              <td>${node.reason}</td>
              <td>${shortTime(node.deadLetteredAt)}</td>
              <td title=${node.standingReason} data-testid="dead-letter-standing">${node.standing}</td>
              <td><button type="button" class="link" aria-expanded=${open === node.messageId} onClick=${() => setOpen(open === node.messageId ? undefined : node.messageId)} data-testid="dead-letter-show">${open === node.messageId ? 'Hide' : 'Show'}</button></td>
            </tr>
            ${open === node.messageId && html`<tr class="expanded"><td colspan="8"><${Details} letter=${node} onDone=${() => setTimeout(list.reload, 1_500)} /></td></tr>`}`)}
        </tbody>
      </table>
      ${!list.loading && !list.error && edges.length === 0 && html`<p class="hint" data-testid="dead-letters-empty">No dead letters.</p>`}
    </div>
    ${list.data && html`<${Pager} paging=${paging} pageInfo=${list.data.deadLetters.pageInfo} firstLabel="Oldest" />`}
  </section>`;
}
