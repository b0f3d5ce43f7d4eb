// A workflow's DAG as SVG: steps in columns by depth (the longest path from a root), each
// coloured by its status, edges from each dependency; a step with an execution is a link to
// its timeline (focusable, Enter opens it).
import { hrefOf, html, navigate } from './shared.js';

const NODE_W = 168;
const NODE_H = 48;
const COL_W = 220;
const ROW_H = 72;
const MARGIN = 16;

/** @param {{ id: string, dependsOn: string[] }[]} steps */
export function layoutDag(steps) {
  const byId = new Map(steps.map((s) => [s.id, s]));
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0; // a cycle cannot be submitted; stay finite anyway
    seen.add(id);
    const parents = byId.get(id)?.dependsOn.filter((p) => byId.has(p)) ?? [];
    const d = parents.length ? 1 + Math.max(...parents.map((p) => depthOf(p, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const s of steps) (columns[depthOf(s.id)] ??= []).push(s.id);
  const rows = Math.max(1, ...columns.map((c) => c?.length ?? 0));
  const placed = new Map();
  columns.forEach((column, i) =>
    column?.forEach((id, row) => {
      const offset = ((rows - column.length) * ROW_H) / 2; // centre short columns
      placed.set(id, { x: MARGIN + i * COL_W, y: MARGIN + offset + row * ROW_H });
    }),
  );
  return { placed, width: MARGIN * 2 + (columns.length - 1) * COL_W + NODE_W, height: MARGIN * 2 + (rows - 1) * ROW_H + NODE_H };
}

/**
 * @param {{ steps: { id: string, action: string, dependsOn: string[], status: string, executionId: string | null, execution: { status: string } | null }[] }} props
 */
export function Dag({ steps }) {
  const { placed, width, height } = layoutDag(steps);
  const open = (e, to) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
    e.preventDefault();
    navigate(to);
  };
  return html`<svg class="dag" viewBox="0 0 ${width} ${height}" role="group" aria-label="The workflow's steps and their dependencies" data-testid="dag" style=${{ maxWidth: `${width}px` }}>
    <defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" /></marker></defs>
    ${steps.flatMap((s) =>
      s.dependsOn
        .filter((p) => placed.has(p))
        .map((p) => {
          const a = placed.get(p);
          const b = placed.get(s.id);
          const x0 = a.x + NODE_W;
          const y0 = a.y + NODE_H / 2;
          const x1 = b.x - 2;
          const y1 = b.y + NODE_H / 2;
          const mid = (x0 + x1) / 2;
          return html`<path class="dag-edge" d=${`M${x0},${y0} C${mid},${y0} ${mid},${y1} ${x1},${y1}`} marker-end="url(#dag-arrow)" data-testid=${`dag-edge-${p}-${s.id}`} />`;
        }),
    )}
    ${steps.map((s) => {
      const { x, y } = placed.get(s.id);
      const to = s.executionId ? { execution: s.executionId } : undefined;
      const shown = s.status === 'Scheduled' && s.execution ? s.execution.status : s.status;
      const node = html`<rect x=${x} y=${y} width=${NODE_W} height=${NODE_H} rx="8" />
        <text class="dag-id" x=${x + 10} y=${y + 19}>${s.id}</text>
        <text class="dag-sub" x=${x + 10} y=${y + 36}>${shown} · ${s.action}</text>
        <title>${s.id}: ${s.action}, ${shown}${to ? ' (open its timeline)' : ' (no execution yet)'}</title>`;
      const cls = `dag-node dag-node--${s.status} ${s.status === 'Scheduled' && s.execution ? `dag-node--run-${s.execution.status}` : ''}`;
      return to
        ? html`<a href=${hrefOf(to)} class=${cls} onClick=${(e) => open(e, to)} data-testid=${`dag-step-${s.id}`} data-status=${s.status} aria-label=${`Step ${s.id}, ${shown}: open its execution`}>${node}</a>`
        : html`<g class=${cls} data-testid=${`dag-step-${s.id}`} data-status=${s.status}>${node}</g>`;
    })}
  </svg>`;
}
