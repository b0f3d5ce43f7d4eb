// The events of one execution: a time ruler (where each event fell in time), the events in
// revision order as buttons, and the slider that selects a revision.
import { h } from './vendor/preact.mjs';
import { useEffect, useRef } from './vendor/hooks.mjs';
import htm from './vendor/htm.mjs';

const html = htm.bind(h);

const RULER_W = 1000;
const RULER_PAD = 12;

/** "+350 ms", "+4.2 s", "+3 min 5 s" */
export function sinceStart(ms) {
  if (ms < 1000) return `+${Math.round(ms)} ms`;
  if (ms < 60_000) return `+${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `+${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** The type with a line-break opportunity before each word: "Execution<wbr>Retry<wbr>Scheduled". */
const breakable = (type) => type.split(/(?=[A-Z])/).map((word, i) => (i === 0 ? word : html`<wbr />${word}`));

/** What a card says beyond its type: where a handoff went, why it failed or was reclaimed. */
function noteOf(step) {
  const data = step.data ?? {};
  if (step.type === 'ExecutionHandedOff' && data.workerId) return html`→ <strong data-testid="handoff-${step.revision}">worker:${data.workerId}</strong>`;
  if (typeof data.error?.message === 'string') return data.error.message;
  if (typeof data.reason === 'string') return data.reason;
  return null;
}

/**
 * @param {{ steps: { revision: number, type: string, by: string, recordedAt: string }[], revision: number, onSelect: (revision: number) => void }} props
 */
export function Timeline({ steps, revision, onSelect }) {
  const times = steps.map((s) => Date.parse(s.recordedAt));
  const start = times[0] ?? 0;
  const span = Math.max(...times) - start;
  // Evenly spaced when every event has the same timestamp (nothing to scale by).
  const xOf = (i) => RULER_PAD + (RULER_W - 2 * RULER_PAD) * (span > 0 ? (times[i] - start) / span : steps.length > 1 ? i / (steps.length - 1) : 0);
  const last = steps.length - 1;
  const list = useRef(null);
  useEffect(() => keepSelectedInView(list.current), [revision]);
  return html`
    <section class="timeline" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Events <span class="muted">(${steps.length}, over ${sinceStart(span).slice(1)})</span></h2>
      <svg class="ruler" viewBox="0 0 ${RULER_W} 28" preserveAspectRatio="none" aria-hidden="true">
        <line x1=${RULER_PAD} y1="14" x2=${RULER_W - RULER_PAD} y2="14" />
        ${steps.map(
          (s, i) => html`<line class=${`tick ${s.revision === revision ? 'tick--selected' : s.revision < revision ? 'tick--past' : ''}`}
            x1=${xOf(i)} x2=${xOf(i)} y1=${s.revision === revision ? 2 : 7} y2=${s.revision === revision ? 26 : 21} />`,
        )}
      </svg>
      <ol class="events" role="list" ref=${list}>
        ${steps.map(
          (s, i) => html`<li>
            <button type="button" class=${`event ${s.revision === revision ? 'event--selected' : s.revision < revision ? 'event--past' : ''}`}
              aria-pressed=${s.revision === revision} data-testid="event-${s.revision}" onClick=${() => onSelect(s.revision)}>
              <span class="event-rev">#${s.revision}</span>
              <span class="event-type" title=${s.type}>${breakable(s.type)}</span>
              <span class="event-by">by ${s.by}</span>
              ${noteOf(s) && html`<span class="event-note">${noteOf(s)}</span>`}
              <span class="event-time">${sinceStart(times[i] - start)}</span>
            </button>
          </li>`,
        )}
      </ol>
      <div class="scrubber">
        <label for="revision-slider">Revision</label>
        <input id="revision-slider" type="range" min="0" max=${last} step="1" value=${revision}
          data-testid="revision-slider" aria-valuetext=${`revision ${revision}: ${steps[revision]?.type ?? ''}`}
          onInput=${(e) => onSelect(Number(e.currentTarget.value))} />
        <output for="revision-slider" data-testid="revision-value">${revision} / ${last}</output>
      </div>
    </section>
  `;
}

/** Scroll the event list (never the page) so the selected event shows. */
function keepSelectedInView(list) {
  const selected = list?.querySelector('[aria-pressed="true"]');
  if (!selected) return;
  const li = selected.parentElement;
  if (li.offsetTop < list.scrollTop || li.offsetTop + li.offsetHeight > list.scrollTop + list.clientHeight) {
    list.scrollTop = li.offsetTop - (list.clientHeight - li.offsetHeight) / 2;
  }
}
