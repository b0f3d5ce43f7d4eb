// What-if from the page: at the selected revision, pick an event the machine could take next,
// give its data, and see the forked path on the statechart. The API's whatIf folds it through
// the current machine in memory: read-only, nothing is stored.
import { useEffect, useState } from './vendor/hooks.mjs';
import { ErrorLine, graphql, html, useQuery } from './shared.js';

const NEXT = `query Next($id: ID!, $revision: Int!) { execution(id: $id) { stateAt(revision: $revision) { status owner attempt next { type by } } } }`;
const WHAT_IF = `query WhatIf($id: ID!, $from: Int!, $events: [WhatIfEventInput!]!) {
  execution(id: $id) { whatIf(fromRevision: $from, events: $events) { fromRevision baseState ok finalState steps { type by before after owner refused } } }
}`;

// A starting point for each event's data, so the form is not blank (the event catalog, in
// schemas/events.ts, has the rules; the API names any field it refuses).
function exampleData(type, { owner, attempt }) {
  const now = new Date().toISOString();
  const worker = owner.startsWith('worker:') ? owner.slice('worker:'.length) : 'w1';
  const examples = {
    SchedulingStarted: {},
    ExecutionHandedOff: { workerId: worker, attempt, deadline: now },
    ExecutionStarted: { attempt },
    ExecutionProgressed: { details: {} },
    ExecutionCompleted: { result: null },
    ExecutionFailed: { error: { message: 'what if it failed here?' }, retryable: true },
    ExecutionRetryScheduled: { attempt: attempt + 1, retryAt: now, reason: 'what if' },
    ExecutionCancelled: { reason: 'what if' },
    ExecutionCancelRequested: { reason: 'what if' },
    ExecutionTimedOut: { limit: 'start-to-close', deadline: now },
    OwnershipReclaimed: { reason: 'worker-lost', workerId: worker, attempt },
    OwnershipReleased: { reason: 'what if' },
    ExecutionAbandoned: { reason: 'what if' },
  };
  return examples[type] ?? {};
}

export function WhatIf({ executionId, revision, onFork }) {
  const next = useQuery(() => graphql(NEXT, { id: executionId, revision }), `${executionId}:${revision}`);
  const state = next.data?.execution?.stateAt;
  const choices = state?.next ?? [];
  const [choice, setChoice] = useState(0);
  const [data, setData] = useState('');
  const [result, setResult] = useState({});
  useEffect(() => {
    setChoice(0);
    setResult({});
  }, [executionId, revision]);
  const picked = choices[choice];
  const exampleFor = (c) => (c ? JSON.stringify(exampleData(c.type, state)) : '');
  useEffect(() => setData(exampleFor(picked)), [picked?.type, state]);
  // The event and its example data change in one render: an effect runs only after paint, and a
  // "Try it" in between would send the new event with the previous event's data.
  const pick = (i) => {
    setChoice(i);
    setData(exampleFor(choices[i]));
  };

  const run = async (e) => {
    e.preventDefault();
    let parsed;
    try {
      parsed = data.trim() ? JSON.parse(data) : {};
    } catch (err) {
      return setResult({ error: new Error(`event data: not JSON (${err.message})`) });
    }
    setResult({ running: true });
    try {
      const r = await graphql(WHAT_IF, { id: executionId, from: revision, events: [{ type: picked.type, data: parsed, by: picked.by }] });
      const fork = r.execution.whatIf;
      setResult({ fork });
      onFork(fork);
    } catch (error) {
      setResult({ error });
      onFork(undefined);
    }
  };
  const clear = () => {
    setResult({});
    onFork(undefined);
  };
  if (choices.length === 0) return html`<p class="muted what-if-none">${next.loading ? '' : 'What-if: no event can follow this revision (a final state).'}</p>`;
  return html`<form class="what-if" onSubmit=${run} aria-label="What if" data-testid="what-if">
    <h3>What if, after revision ${revision}…</h3>
    <div class="what-if-row">
      <label>Event
        <select value=${choice} onChange=${(e) => pick(Number(e.currentTarget.value))} data-testid="what-if-event">
          ${choices.map((c, i) => html`<option value=${i}>${c.type} (by ${c.by})</option>`)}
        </select></label>
      <label class="grow">Data (JSON)
        <input value=${data} onInput=${(e) => setData(e.currentTarget.value)} spellcheck="false" class="mono" data-testid="what-if-data" /></label>
      <button type="submit" class="primary" disabled=${result.running} data-testid="what-if-run">Try it</button>
      ${result.fork && html`<button type="button" onClick=${clear}>Clear</button>`}
    </div>
    <${ErrorLine} error=${result.error} />
    ${result.fork && html`<p class=${result.fork.ok ? 'what-if-result' : 'what-if-result error'} role="status" data-testid="what-if-result">
      ${result.fork.steps.map((s) => (s.after ? html`${s.before} → <strong>${s.after}</strong> (${s.type})` : html`${s.type} refused in ${s.before}: ${s.refused}`))}
      <span class="muted"> · simulated, nothing stored</span></p>`}
  </form>`;
}
