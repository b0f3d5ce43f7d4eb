// The execution machine's statechart as SVG, with the path an execution took drawn on it.
// Layout: the states that are not final in columns by their distance from the initial state,
// the final states in a row beneath, ordered by where their transitions come from. Edges that go
// back, or skip a column, arc over the top row, so they never run through a state.
import { h } from './vendor/preact.mjs';
import htm from './vendor/htm.mjs';

const html = htm.bind(h);

const NODE_W = 116;
const NODE_H = 38;
const SLOT_W = 200; // horizontal room per state in the wider row
const ROW_H = 80; // between states of one column
const TOP = 170; // room above the top row for the arcs
const FINALS_BELOW = 200; // from the last top row to the final row
const MARGIN = 16;

/**
 * @typedef {{ name: string, final: boolean }} MachineState
 * @typedef {{ from: string, to: string, event: string }} MachineTransition
 * @typedef {{ version: string, initial: string, states: MachineState[], transitions: MachineTransition[] }} Machine
 * @typedef {{ name: string, final: boolean, x: number, y: number, row: 'top' | 'final' }} PlacedState
 * @typedef {{ from: string, to: string, events: string[] }} Edge
 */

/** @param {Machine} machine */
export function layoutStates(machine) {
  const finals = new Set(machine.states.filter((s) => s.final).map((s) => s.name));
  const depth = new Map([[machine.initial, 0]]);
  for (const queue = [machine.initial]; queue.length > 0; ) {
    const from = queue.shift();
    for (const t of machine.transitions) {
      if (t.from !== from || finals.has(t.to) || depth.has(t.to)) continue;
      depth.set(t.to, depth.get(from) + 1);
      queue.push(t.to);
    }
  }
  let deepest = Math.max(...depth.values());
  for (const s of machine.states) if (!s.final && !depth.has(s.name)) depth.set(s.name, ++deepest); // unreachable: last

  /** @type {string[][]} */
  const columns = [];
  for (const s of machine.states) if (!s.final) (columns[depth.get(s.name)] ??= []).push(s.name);
  const top = columns.filter(Boolean);
  const finalNames = machine.states.filter((s) => s.final).map((s) => s.name);
  const width = Math.max(top.length, finalNames.length, 1) * SLOT_W;
  const rows = Math.max(1, ...top.map((c) => c.length));

  /** @type {Map<string, PlacedState>} */
  const placed = new Map();
  top.forEach((column, i) =>
    column.forEach((name, row) => placed.set(name, { name, final: false, x: MARGIN + ((i + 0.5) * width) / top.length, y: TOP + row * ROW_H, row: 'top' })),
  );
  // Each final state under the mean position of the states that lead to it.
  const under = (name) => {
    const xs = machine.transitions.filter((t) => t.to === name && placed.has(t.from)).map((t) => placed.get(t.from).x);
    return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Infinity;
  };
  const finalY = TOP + (rows - 1) * ROW_H + FINALS_BELOW;
  [...finalNames]
    .sort((a, b) => under(a) - under(b))
    .forEach((name, i) => placed.set(name, { name, final: true, x: MARGIN + ((i + 0.5) * width) / finalNames.length, y: finalY, row: 'final' }));
  return { placed, width: width + 2 * MARGIN, height: finalY + NODE_H / 2 + MARGIN + 20 };
}

/**
 * One edge per pair of states, naming every event that takes it.
 * @param {MachineTransition[]} transitions
 * @param {Iterable<string>} extraPairs pairs the execution took that the machine does not list (an older version's)
 */
export function edgesOf(transitions, extraPairs = []) {
  /** @type {Map<string, Edge>} */
  const edges = new Map();
  for (const t of transitions) {
    const key = `${t.from}->${t.to}`;
    const edge = edges.get(key) ?? { from: t.from, to: t.to, events: [] };
    if (!edge.events.includes(t.event)) edge.events.push(t.event);
    edges.set(key, edge);
  }
  for (const key of extraPairs) {
    if (edges.has(key)) continue;
    const [from, to] = key.split('->');
    edges.set(key, { from, to, events: [] });
  }
  return [...edges.values()];
}

/** Which shoulder a state's loop goes on: away from the arcs that reach it. */
function loopSides(edges, placed) {
  const sides = new Map();
  for (const s of placed.values()) {
    const others = edges
      .filter((e) => e.from !== e.to && isArc(e, placed) && (e.from === s.name || e.to === s.name))
      .map((e) => placed.get(e.from === s.name ? e.to : e.from).x);
    sides.set(s.name, others.length > 0 && others.every((x) => x < s.x) ? 'right' : 'left');
  }
  return sides;
}

const sameRow = (a, b) => a.row === 'top' && b.row === 'top' && a.y === b.y;

/** A top-row edge that goes back or skips a state: drawn as an arc over the row. */
function isArc(edge, placed) {
  const a = placed.get(edge.from);
  const b = placed.get(edge.to);
  if (a === b || !sameRow(a, b)) return false;
  const between = [...placed.values()].some((s) => sameRow(s, a) && s.x > Math.min(a.x, b.x) && s.x < Math.max(a.x, b.x));
  return b.x < a.x || between;
}

/**
 * Where an edge runs, and where its own label sits (edges between rows are labelled per target
 * instead: see crossLabels).
 */
function geometry(edge, placed, spread, loopSide) {
  const a = placed.get(edge.from);
  const b = placed.get(edge.to);
  const halfW = NODE_W / 2;
  const halfH = NODE_H / 2;
  if (a === b) {
    const sign = loopSide.get(a.name) === 'right' ? 1 : -1;
    const x0 = a.x + sign * (halfW - 16);
    const x1 = a.x + sign * 14;
    const y = a.y - halfH;
    return { d: `M${x0},${y} C${x0 + sign * 16},${y - 50} ${x1 - sign * 16},${y - 50} ${x1},${y}`, lx: (x0 + x1) / 2, ly: y - 44 };
  }
  if (sameRow(a, b)) {
    if (!isArc(edge, placed)) return { d: `M${a.x + halfW},${a.y} L${b.x - halfW},${b.y}`, lx: (a.x + b.x) / 2, ly: a.y - 8 };
    // Over the top row, higher the further it reaches; ends apart so arrows do not meet.
    const span = Math.abs(b.x - a.x) / SLOT_W;
    const lift = 24 + 30 * span;
    const x0 = a.x + (b.x < a.x ? -8 : 8);
    const x1 = b.x + (b.x < a.x ? 1 : -1) * (14 + 10 * span);
    const y = a.y - halfH;
    const mid = (x0 + x1) / 2;
    return { d: `M${x0},${y} Q${mid},${y - 2 * lift} ${x1},${y}`, lx: mid, ly: y - lift - 6 };
  }
  // Between rows: a straight line, its ends spread so edges sharing a state share no point.
  const down = b.y > a.y;
  const x0 = a.x + spread.out(edge);
  const x1 = b.x + spread.in(edge);
  const y0 = a.y + (down ? halfH : -halfH);
  const y1 = b.y + (down ? -halfH : halfH);
  return { d: `M${x0},${y0} L${x1},${y1}`, cross: { x0, y0, x1, y1 } };
}

/** Offsets along a state's top or bottom for the straight edges leaving and entering it. */
function spreadEnds(edges, placed) {
  const straight = edges.filter((e) => placed.get(e.from).row !== placed.get(e.to).row);
  const offsets = new Map();
  const assign = (side, keyOf, other) => {
    for (const group of Map.groupBy(straight, keyOf).values()) {
      group.sort((e1, e2) => placed.get(other(e1)).x - placed.get(other(e2)).x);
      group.forEach((e, i) => offsets.set(`${side}:${e.from}->${e.to}`, (i - (group.length - 1) / 2) * 14));
    }
  };
  assign('out', (e) => e.from, (e) => e.to);
  assign('in', (e) => e.to, (e) => e.from);
  return {
    out: (e) => offsets.get(`out:${e.from}->${e.to}`) ?? 0,
    in: (e) => offsets.get(`in:${e.from}->${e.to}`) ?? 0,
  };
}

/**
 * Labels for the edges between rows: one per event into each state, a little above it on the
 * steepest of those edges, so four "ExecutionCancelled" lines read once and no labels collide.
 */
function crossLabels(drawn, placed, taken) {
  const labels = [];
  const cross = drawn.filter((d) => d.cross);
  for (const group of Map.groupBy(cross, (d) => `${d.edge.to}:${d.edge.events.join(' · ')}`).values()) {
    const steepest = group.reduce((best, d) => (Math.abs(d.cross.x1 - d.cross.x0) < Math.abs(best.cross.x1 - best.cross.x0) ? d : best));
    const { x0, y0, x1, y1 } = steepest.cross;
    const y = y1 - Math.sign(y1 - y0) * 34;
    const x = x0 + ((x1 - x0) * (y - y0)) / (y1 - y0);
    const count = group.reduce((n, d) => n + (taken.get(d.key) ?? 0), 0);
    const text = steepest.edge.events.join(' · ');
    if (text) labels.push({ key: `${steepest.edge.to}:${text}`, x, y, text, count });
  }
  return labels;
}

// About how wide an 11px label is per character (system sans-serif), to keep labels in the picture.
const LABEL_CHAR_W = 6.4;

/** The viewBox that holds the states and every label (a label near the edge would be clipped). */
function viewBoxOf(width, height, labels) {
  let minX = 0;
  let maxX = width;
  for (const l of labels) {
    const half = (l.text.length * LABEL_CHAR_W) / 2;
    minX = Math.min(minX, l.x - half - 4);
    maxX = Math.max(maxX, l.x + half + 4);
  }
  return { minX, viewWidth: maxX - minX, height };
}

/**
 * @param {{ machine: Machine, current: string, taken: Map<string, number>, last: string | undefined, visited: Set<string>, fork?: { ok: boolean, finalState: string, steps: { before: string, after: string | null }[] } }} props
 *   taken: times each `from->to` pair was traversed up to the selected revision; last: the pair
 *   the selected event took; fork: a what-if's steps, drawn dashed from the current state.
 */
export function Statechart({ machine, current, taken, last, visited, fork }) {
  const { placed, width, height } = layoutStates(machine);
  const forkPairs = new Set((fork?.steps ?? []).filter((s) => s.after).map((s) => `${s.before}->${s.after}`));
  const edges = edgesOf(machine.transitions, [...taken.keys(), ...forkPairs]).filter((e) => placed.has(e.from) && placed.has(e.to));
  const spread = spreadEnds(edges, placed);
  const loopSide = loopSides(edges, placed);
  const drawn = edges
    .map((edge) => ({ edge, key: `${edge.from}->${edge.to}`, ...geometry(edge, placed, spread, loopSide) }))
    .sort((e1, e2) => (taken.get(e1.key) ?? 0) - (taken.get(e2.key) ?? 0)); // the path on top
  const kindOf = (key) => (key === last ? 'last' : (taken.get(key) ?? 0) > 0 ? 'taken' : 'plain');
  const labels = [
    ...drawn
      .filter((d) => !d.cross && d.edge.events.length > 0)
      .map((d) => ({ key: d.key, x: d.lx, y: d.ly, text: d.edge.events.join(' · '), count: taken.get(d.key) ?? 0, kind: kindOf(d.key) })),
    ...crossLabels(drawn, placed, taken).map((l) => ({ ...l, kind: l.count > 0 ? 'taken' : 'plain' })),
  ];
  const forkEnd = fork?.ok ? fork.finalState : undefined;
  const described = `Statechart of machine ${machine.version}; the execution is in ${current}.${forkEnd ? ` What-if: it would end in ${forkEnd}.` : ''}`;
  const box = viewBoxOf(width, height, labels);
  return html`
    <svg class="statechart" viewBox="${box.minX} 0 ${box.viewWidth} ${box.height}" role="img" aria-label=${described} data-testid="statechart">
      <defs>
        ${['plain', 'taken', 'last', 'fork'].map(
          (kind) => html`<marker id="arrow-${kind}" class="arrow arrow--${kind}" viewBox="0 0 10 10" refX="9" refY="5"
            markerWidth="8" markerHeight="8" markerUnits="userSpaceOnUse" orient="auto-start-reverse">
            <path d="M0,0 L10,5 L0,10 z" />
          </marker>`,
        )}
      </defs>
      ${drawn.map(({ edge, key, d }) => {
        const count = taken.get(key) ?? 0;
        const kind = kindOf(key);
        return html`<g class="edge edge--${kind}" data-testid="edge-${edge.from}-${edge.to}" data-traversed=${count}>
          <title>${edge.from} → ${edge.to}: ${edge.events.join(', ') || '(not in this machine version)'}${count ? `; taken ${count}×` : ''}</title>
          <path d=${d} marker-end="url(#arrow-${kind})" />
        </g>`;
      })}
      ${drawn
        .filter(({ key }) => forkPairs.has(key))
        .map(({ edge, d }) => html`<g class="edge edge--fork" data-testid="fork-edge-${edge.from}-${edge.to}"><path d=${d} marker-end="url(#arrow-fork)" /></g>`)}
      ${labels.map(
        (l) => html`<text class="label label--${l.kind}" x=${l.x} y=${l.y} text-anchor="middle">${l.text}</text>
          ${l.count > 1 && html`<text class="label label--count" x=${l.x} y=${l.y + 22} text-anchor="middle">×${l.count}</text>`}`,
      )}
      ${[...placed.values()].map((s) => {
        const state = s.name === current ? 'current' : visited.has(s.name) ? 'visited' : 'idle';
        return html`<g class="state state--${state} ${s.final ? 'state--final' : ''} ${s.name === forkEnd && s.name !== current ? 'state--fork' : ''}" data-testid="state-${s.name}"
            data-current=${s.name === current ? 'true' : 'false'} data-visited=${visited.has(s.name) ? 'true' : 'false'} data-fork-end=${s.name === forkEnd ? 'true' : 'false'}>
          <rect x=${s.x - NODE_W / 2} y=${s.y - NODE_H / 2} width=${NODE_W} height=${NODE_H} rx="10" />
          ${s.final && html`<rect class="inner" x=${s.x - NODE_W / 2 + 4} y=${s.y - NODE_H / 2 + 4} width=${NODE_W - 8} height=${NODE_H - 8} rx="7" />`}
          <text x=${s.x} y=${s.y + 5} text-anchor="middle">${s.name}</text>
        </g>`;
      })}
    </svg>
  `;
}

/**
 * The pairs of states the steps up to `revision` traversed, with counts, and the states visited.
 * @param {{ revision: number, stateBefore: string | null, state: string }[]} steps
 * @param {number} revision
 */
export function pathTaken(steps, revision) {
  const taken = new Map();
  const visited = new Set();
  let last;
  for (const step of steps) {
    if (step.revision > revision) break;
    visited.add(step.state);
    if (step.stateBefore === null) continue;
    const key = `${step.stateBefore}->${step.state}`;
    taken.set(key, (taken.get(key) ?? 0) + 1);
    if (step.revision === revision) last = key;
  }
  return { taken, visited, last };
}
