// One schedule (`?schedule=<id>`): its definition, next fire times, and its recent ticks, each a
// link to the execution or workflow it started (with that one's status now); live while shown.
// Pause, resume, trigger now and delete are mutations: the admin token only, each after a
// confirmation; the API refuses them to the read-only token and the page says so.
import { useState } from './vendor/hooks.mjs';
import { Forbidden } from './graphql.js';
import { Badge, Confirm, duration, ErrorLine, graphql, html, Link, shortId, shortTime, useMayChange, useQuery } from './shared.js';
import { fromNow, ScheduleBadge, Target, Trigger } from './schedules.js';

const LIVE_MS = 3_000;
const SCHEDULE = `query Schedule($id: ID!) {
  schedule(id: $id) { id status triggerKind cron timezone everyMs targetKind action input workflow jitterMs overlap catchUp startAt endAt
    createdAt updatedAt pausedAt pauseReason fired skipped nextFireTimes revision
    recentTicks { tickAt fireAt manual targetKind targetId } }
}`;

const REASON = 'from the console';
const CHANGES = {
  pause: {
    label: 'Pause',
    question: (id) => `Pause schedule ${id}? No tick fires until it is resumed.`,
    mutation: `mutation Pause($id: ID!) { r: pauseSchedule(id: $id, reason: "paused ${REASON}") { message } }`,
  },
  resume: {
    label: 'Resume',
    question: (id) => `Resume schedule ${id}? Ticks fire again from now on; those that fell while it was paused do not.`,
    mutation: `mutation Resume($id: ID!) { r: resumeSchedule(id: $id) { message } }`,
  },
  trigger: {
    label: 'Trigger now',
    question: (id) => `Fire schedule ${id} now, outside its trigger? Its target is started at once.`,
    mutation: `mutation Trigger($id: ID!) { r: triggerSchedule(id: $id) { targetKind targetId started } }`,
  },
  delete: {
    label: 'Delete',
    question: (id) => `Delete schedule ${id}? No tick fires any more (its history stays). This cannot be undone.`,
    mutation: `mutation Delete($id: ID!) { r: deleteSchedule(id: $id, reason: "deleted ${REASON}") { message } }`,
  },
};

/** Which changes the schedule's status allows (the API refuses the others anyway). */
const changesFor = (status) => (status === 'Active' ? ['trigger', 'pause', 'delete'] : status === 'Paused' ? ['trigger', 'resume', 'delete'] : []);

const targetLink = (kind, id) => (kind === 'action' ? { execution: id } : { workflow: id });

/** The statuses of the ticks' targets, in one request (aliases), while the page shows. */
function useTargetStatuses(ticks) {
  const wanted = ticks.map((t, i) => ({ alias: `t${i}`, kind: t.targetKind, id: t.targetId }));
  const query = `query TickTargets(${wanted.map((w) => `$${w.alias}: ID!`).join(', ')}) {
    ${wanted.map((w) => `${w.alias}: ${w.kind === 'action' ? 'execution' : 'workflow'}(id: $${w.alias}) { status }`).join('\n')}
  }`;
  const variables = Object.fromEntries(wanted.map((w) => [w.alias, w.id]));
  const key = wanted.length ? wanted.map((w) => w.id).join(',') : null;
  const result = useQuery(() => graphql(query, variables), key, { pollMs: LIVE_MS });
  return Object.fromEntries(wanted.map((w) => [w.id, result.data?.[w.alias]?.status]));
}

function Ticks({ ticks }) {
  const newestFirst = [...ticks].reverse();
  const statuses = useTargetStatuses(ticks);
  return html`<section class="panel" aria-labelledby="ticks-title">
    <h2 id="ticks-title">Recent ticks <span class="muted">(the latest ${ticks.length}, newest first)</span></h2>
    ${ticks.length === 0
      ? html`<p class="muted" data-testid="no-ticks">No tick has fired yet.</p>`
      : html`<table class="list" data-testid="ticks-table">
          <thead><tr><th>Tick</th><th>Fired</th><th>How</th><th>Started</th><th>Its status</th></tr></thead>
          <tbody>${newestFirst.map(
            (t) => html`<tr data-testid="tick-row" data-target=${t.targetId}>
              <td>${shortTime(t.tickAt)}</td>
              <td>${shortTime(t.fireAt)}${t.fireAt !== t.tickAt ? html` <span class="muted">(+${duration(Date.parse(t.fireAt) - Date.parse(t.tickAt))} jitter)</span>` : ''}</td>
              <td>${t.manual ? 'by hand' : 'on its trigger'}</td>
              <td>${t.targetKind} <${Link} to=${targetLink(t.targetKind, t.targetId)} class="mono" data-testid="tick-target" title=${t.targetId}>${shortId(t.targetId)}</${Link}></td>
              <td>${statuses[t.targetId] ? html`<${Badge} status=${statuses[t.targetId]} />` : html`<span class="muted">—</span>`}</td>
            </tr>`,
          )}</tbody>
        </table>`}
  </section>`;
}

function Changes({ schedule, onDone }) {
  const [asking, setAsking] = useState(undefined);
  const [outcome, setOutcome] = useState({});
  const mayChange = useMayChange();
  const run = async (kind) => {
    setAsking(undefined);
    setOutcome({ running: kind });
    try {
      const { r } = await graphql(CHANGES[kind].mutation, { id: schedule.id });
      const done = kind === 'trigger' ? `Triggered: ${r.targetKind} ${r.targetId}${r.started ? ' started' : ' existed already'}.` : `${r.message[0].toUpperCase()}${r.message.slice(1)}.`;
      setOutcome({ done, target: kind === 'trigger' ? targetLink(r.targetKind, r.targetId) : undefined });
      onDone();
    } catch (error) {
      setOutcome({ error: error instanceof Forbidden ? new Error(`Refused: ${error.message}`) : error });
    }
  };
  const kinds = changesFor(schedule.status);
  if (kinds.length === 0) return html`<p class="muted" data-testid="schedule-deleted">Deleted: no tick fires any more; its history stays.</p>`;
  return html`<div class="schedule-changes">
    ${outcome.done && html`<p role="status" class="ok" data-testid="schedule-outcome">${outcome.done}${outcome.target && html` <${Link} to=${outcome.target}>Open it</${Link}>`}</p>`}
    <${ErrorLine} error=${outcome.error} />
    ${asking
      ? html`<${Confirm} question=${CHANGES[asking].question(schedule.id)} confirmLabel=${CHANGES[asking].label} onConfirm=${() => run(asking)} onCancel=${() => setAsking(undefined)} />`
      : html`<div class="buttons">
          ${kinds.map((k) => html`<button type="button" class=${k === 'delete' ? 'danger' : ''} onClick=${() => setAsking(k)} disabled=${!!outcome.running} data-testid=${`schedule-${k}`}>${CHANGES[k].label}…</button>`)}
          ${mayChange === false && html`<span class="muted">needs the admin token</span>`}
        </div>`}
  </div>`;
}

function Definition({ schedule: s }) {
  const json = s.targetKind === 'action' ? s.input : s.workflow;
  return html`<section class="panel" aria-labelledby="definition-title">
    <h2 id="definition-title">Definition <span class="muted">(revision ${s.revision})</span></h2>
    <dl class="facts">
      <dt>Target</dt><dd><${Target} schedule=${s} /></dd>
      <dt>Trigger</dt><dd><${Trigger} schedule=${s} /></dd>
      <dt>Jitter</dt><dd>${s.jitterMs ? duration(s.jitterMs) : 'none'}</dd>
      <dt>Overlap</dt><dd>${s.overlap}</dd>
      <dt>Catch-up</dt><dd>${s.catchUp === 0 ? 'none: missed ticks are skipped' : `up to ${s.catchUp} missed ticks`}</dd>
      ${s.startAt && html`<dt>Starts</dt><dd>${shortTime(s.startAt)}</dd>`}
      ${s.endAt && html`<dt>Ends</dt><dd>${shortTime(s.endAt)}</dd>`}
      <dt>Created</dt><dd>${shortTime(s.createdAt)}</dd>
      <dt>Changed</dt><dd>${shortTime(s.updatedAt)}</dd>
      ${s.pausedAt && html`<dt>Paused</dt><dd>${shortTime(s.pausedAt)}${s.pauseReason ? html` <span class="muted">(${s.pauseReason})</span>` : ''}</dd>`}
    </dl>
    ${json != null && html`<details class="definition-json"><summary>${s.targetKind === 'action' ? 'Input' : 'Workflow definition'}</summary><pre class="json">${JSON.stringify(json, null, 2)}</pre></details>`}
  </section>`;
}

/** The view for `?schedule=<id>`. */
export function SchedulePage({ params }) {
  const id = params.get('schedule');
  const result = useQuery(() => graphql(SCHEDULE, { id }), id, { pollMs: LIVE_MS });
  const schedule = result.data?.schedule;
  return html`<section class="view" aria-labelledby="schedule-title">
    <${ErrorLine} error=${result.error} />
    ${result.data && !schedule && html`<p class="hint" role="status">No schedule ${id}.</p>`}
    ${schedule &&
    html`<header class="execution-head">
        <div>
          <h1 id="schedule-title">Schedule <span class="mono">${schedule.id}</span></h1>
          <p class="muted"><${Link} to=${{ view: 'schedules' }}>all schedules</${Link}> · fired <strong data-testid="schedule-fired">${schedule.fired}</strong>, skipped ${schedule.skipped}</p>
        </div>
        <div class="execution-status"><${ScheduleBadge} status=${schedule.status} /></div>
      </header>
      <${Changes} schedule=${schedule} onDone=${() => setTimeout(result.reload, 300)} />
      <div class="schedule-grid">
        <${Definition} schedule=${schedule} />
        <section class="panel" aria-labelledby="next-title">
          <h2 id="next-title">Next fire times</h2>
          ${schedule.nextFireTimes.length === 0
            ? html`<p class="muted" data-testid="no-next-fire">None: ${schedule.status === 'Paused' ? 'paused' : schedule.status === 'Deleted' ? 'deleted' : 'no tick left'}.</p>`
            : html`<ol class="next-fires" data-testid="next-fire-times">${schedule.nextFireTimes.map((t) => html`<li>${shortTime(t)} <span class="muted">(${fromNow(t)})</span></li>`)}</ol>`}
        </section>
      </div>
      <${Ticks} ticks=${schedule.recentTicks} />`}
  </section>`;
}
