// The execution as it stood after the selected event: state, owner and attempt, the event
// itself, and the machine context with the keys that event changed highlighted.
import { h } from './vendor/preact.mjs';
import htm from './vendor/htm.mjs';

const html = htm.bind(h);

const pretty = (value) => (value === undefined ? 'undefined' : JSON.stringify(value, null, 2));
const compact = (value) => {
  const text = value === undefined ? 'absent' : JSON.stringify(value);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
};
/** "2026-11-21 09:54:40.558", local time to the millisecond: events are often milliseconds apart. */
function localTime(iso) {
  const d = new Date(iso);
  const pad = (n, width = 2) => String(n).padStart(width, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}
const indent = (text) => text.replaceAll('\n', '\n  ');

/**
 * The context as JSON, one block per top-level key; a changed key is marked and says what it was.
 * @param {{ context: Record<string, unknown>, changed: string[], before: Record<string, unknown> | undefined }} props
 */
function ContextView({ context, changed, before }) {
  const changedSet = new Set(changed);
  const entries = [
    ...Object.keys(context).map((key) => ({ key, text: `"${key}": ${indent(pretty(context[key]))}`, changed: changedSet.has(key) })),
    ...changed.filter((key) => !(key in context)).map((key) => ({ key, text: `"${key}": (removed)`, changed: true })),
  ];
  // Newlines as strings: htm drops whitespace that contains one between tags.
  return html`<pre class="json" data-testid="context">${'{\n'}${entries.map(
    (e, i) => html`<span class=${`entry ${e.changed ? 'entry--changed' : ''}`} data-testid="context-${e.key}" data-changed=${String(e.changed)}
      >${'  '}${e.text}${i < entries.length - 1 ? ',' : ''}${e.changed && before && html`<span class="was">  was ${compact(before[e.key])}</span>`}</span
    >${'\n'}`,
  )}${'}'}</pre>`;
}

/**
 * @param {{ step: any, before: any | undefined }} props the selected history step and the one before it
 */
export function StatePanel({ step, before }) {
  const error = step.context?.error;
  const errorText = typeof error?.message === 'string' ? `${error.type ? `${error.type}: ` : ''}${error.message}` : undefined;
  return html`
    <section class="panel state-panel" aria-labelledby="state-title">
      <h2 id="state-title">After revision ${step.revision}</h2>
      <dl class="facts">
        <dt>State</dt>
        <dd><span class=${`badge badge--${step.state}`} data-testid="current-state">${step.state}</span>
          ${step.stateBefore && step.stateBefore !== step.state && html`<span class="muted"> from ${step.stateBefore}</span>`}</dd>
        <dt>Owner</dt>
        <dd data-testid="current-owner">${step.owner}</dd>
        <dt>Attempt</dt>
        <dd data-testid="current-attempt">${step.attempt}</dd>
        ${errorText && html`<dt>${step.state === 'Failed' ? 'Error' : 'Last error'}</dt><dd class="error" data-testid="current-error">${errorText}</dd>`}
        <dt>Event</dt>
        <dd><strong>${step.type}</strong> <span class="muted">by</span> ${step.by}</dd>
        <dt>Occurred</dt>
        <dd><time datetime=${step.occurredAt}>${localTime(step.occurredAt)}</time></dd>
        <dt>Recorded</dt>
        <dd><time datetime=${step.recordedAt}>${localTime(step.recordedAt)}</time></dd>
        <dt>Machine</dt>
        <dd>${step.machineVersion ?? html`<span class="muted">unrecorded</span>`}</dd>
      </dl>
      <h3>Event data</h3>
      <pre class="json">${pretty(step.data)}</pre>
    </section>
    <section class="panel context-panel" aria-labelledby="context-title">
      <h2 id="context-title">Context</h2>
      <p class="muted" data-testid="changed-keys">
        ${step.changed.length ? html`Changed: ${step.changed.map((key) => html`<mark>${key}</mark> `)}` : 'No key changed.'}
      </p>
      <${ContextView} context=${step.context} changed=${step.changed} before=${before?.context} />
    </section>
  `;
}
