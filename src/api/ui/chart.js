// Small SVG charts for the actions view: bars (throughput per time slice, the failed part in
// red) and lines (p50 and p95 run time). No library: a few dozen points each.
import { html } from './shared.js';

const W = 190; // about the width it is drawn at, so dots stay round
const H = 70;
const PAD = 4;

const timeOf = (iso) => new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** Bars of `finished` per slice, the failed share of each drawn over it. */
export function ThroughputChart({ buckets, label }) {
  const max = Math.max(1, ...buckets.map((b) => b.finished));
  const bw = (W - 2 * PAD) / buckets.length;
  const y = (n) => H - PAD - ((H - 2 * PAD) * n) / max;
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label=${label} preserveAspectRatio="none">
    <line class="axis" x1=${PAD} x2=${W - PAD} y1=${H - PAD} y2=${H - PAD} />
    ${buckets.map(
      (b, i) => html`<g>
        <title>${timeOf(b.start)}–${timeOf(b.end)}: ${b.finished} finished, ${b.failed} failed</title>
        <rect class="bar" x=${PAD + i * bw + 0.5} width=${Math.max(1, bw - 1)} y=${y(b.finished)} height=${H - PAD - y(b.finished)} />
        ${b.failed > 0 && html`<rect class="bar bar--failed" x=${PAD + i * bw + 0.5} width=${Math.max(1, bw - 1)} y=${y(b.failed)} height=${H - PAD - y(b.failed)} />`}
      </g>`,
    )}
  </svg>`;
}

/** Lines of p50 and p95 per slice; a slice without completions breaks the line. */
export function LatencyChart({ buckets, label }) {
  const max = Math.max(1, ...buckets.map((b) => b.p95Ms ?? 0));
  const step = (W - 2 * PAD) / Math.max(1, buckets.length - 1);
  const y = (ms) => H - PAD - ((H - 2 * PAD) * ms) / max;
  const path = (key) =>
    buckets
      .map((b, i) => (b[key] === null ? null : `${PAD + i * step},${y(b[key]).toFixed(1)}`))
      .reduce((d, point, i, all) => (point === null ? d : `${d}${i === 0 || all[i - 1] === null ? 'M' : 'L'}${point}`), '');
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label=${label} preserveAspectRatio="none">
    <line class="axis" x1=${PAD} x2=${W - PAD} y1=${H - PAD} y2=${H - PAD} />
    <path class="line line--p95" d=${path('p95Ms')} />
    <path class="line line--p50" d=${path('p50Ms')} />
    ${buckets.map((b, i) => (b.p50Ms === null ? null : html`<circle class="dot" cx=${PAD + i * step} cy=${y(b.p50Ms)} r="1.8"><title>${timeOf(b.start)}: p50 ${b.p50Ms} ms, p95 ${b.p95Ms} ms</title></circle>`))}
  </svg>`;
}
