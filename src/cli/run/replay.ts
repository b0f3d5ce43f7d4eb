// What `baton replay | inspect | export` do (their options are defined in replay-commands.ts).
// Replaying a file opens no database.
import type pg from 'pg';
import { EXECUTION_STREAM_PREFIX } from '../../../schemas/events.ts';
import { BatonError } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { countEvents } from '../../eventstore/postgres.ts';
import { eventSummary } from '../../replay/event-summary.ts';
import { readHistoryFile, toHistoryDocument, type HistoryEvent } from '../../replay/history.ts';
import { forkExecution, stepAt, timeline, type ForkEventInput, type ForkResult, type InspectPoint, type TimelineStep } from '../../replay/inspect.ts';
import { describeDivergence, describeTarget, replayHistory, type ReplayStep, type ReplayTarget, type StreamVerdict } from '../../replay/replay.ts';
import { replayStore, type ReplaySummary } from '../../replay/replay-store.ts';
import { loadReplayTarget } from '../../replay/replay-target.ts';
import { readContext } from '../context.ts';
import { fields, table, toJson } from '../format.ts';
import { progressLine } from '../progress.ts';
import { readStoredOrArchivedHistory } from '../../retention/archived-history.ts';
import { notAnExecution } from './archived-notice.ts';

/** The history of the execution `id`, from the store or its archive file; a workflow's id is said to be one (notAnExecution). */
const executionHistory = async (store: EventStore, pool: pg.Pool, id: string): Promise<HistoryEvent[]> =>
  (await readStoredOrArchivedHistory(store, pool, id).catch((err: unknown) => notAnExecution(store, pool, err, id))).events;

const show = (v: unknown) => (v === undefined ? '' : JSON.stringify(v));

function printInspect(id: string, steps: readonly TimelineStep[], step: TimelineStep): void {
  const c = step.context;
  console.log(
    fields([
      ['execution', id],
      ['revision', `${step.revision} of ${steps.at(-1)!.revision}${step.final ? ' (final)' : ''}`],
      ['event', `${step.type} by ${step.by}, occurred ${step.occurredAt}, recorded ${step.recordedAt}${step.machineVersion ? `, machine v${step.machineVersion}` : ''}`],
      ['why', eventSummary(step.type, step.data) || undefined],
      ['state', step.stateBefore ? `${step.stateBefore} → ${step.state}` : step.state],
      ['owner', step.owner],
      ['attempt', `${step.attempt} of ${c.maxAttempts}`],
      ['changed', step.changed.join(', ') || '(nothing)'],
      ['next', step.next.length ? step.next.map((n) => `${n.type} (${n.by})`).join(', ') : '(nothing: final)'],
    ]),
  );
  console.log(`context\n${JSON.stringify(c, null, 2)}`);
}

function printFork(id: string, fork: ForkResult): void {
  const { base } = fork;
  console.log(`what-if for ${id} after revision ${fork.forkAt} (${base.type} → ${base.state}, owner ${base.owner}); simulated through the machine, nothing is written`);
  console.log(
    table(
      ['#', 'EVENT', 'BY', 'STATE', 'OWNER'],
      fork.steps.map((s, i) => [String(i + 1), s.type, s.by, `${s.before} → ${s.after ?? 'REFUSED'}`, s.refused ?? s.owner ?? '']),
    ),
  );
  console.log(fork.ok ? `result: ${fork.finalState}` : `refused: the machine would not take event ${fork.steps.length}`);
}

// An unreadable event was not put to the machine: not replayed, and not refused either.
const refused = (s: ReplayStep) => s.divergence !== undefined && s.divergence.kind !== 'unreadable';
const stepRow = (s: ReplayStep) => [
  String(s.revision),
  s.type,
  s.by,
  `${s.before ?? '–'} → ${s.after ?? (refused(s) ? 'REFUSED' : '(not replayed)')}`,
  s.owner ?? '',
  s.divergence ? (refused(s) ? `DIVERGES (recorded ${s.expected ?? '?'})` : `UNREADABLE (machine version ${s.machineVersion ?? '?'})`) : '',
];

function printStreamReplay(id: string, target: ReplayTarget, steps: ReplayStep[], verdict: StreamVerdict): void {
  console.log(`replaying ${id}: ${steps.length} events against ${describeTarget(target)}`);
  console.log(table(['REV', 'EVENT', 'BY', 'BEFORE → AFTER', 'OWNER', ''], steps.map(stepRow)));
  printVerdictTail(verdict.divergences, `no divergence: every event leads to the recorded state${verdict.inFlight ? ', and it can still move on' : ''}`);
}

function printVerdictTail(divergences: readonly StreamVerdict['divergences'][number][], ok: string, limit = Infinity): void {
  if (divergences.length === 0) {
    console.log(ok);
    return;
  }
  console.log(`${divergences.length} divergence(s):`);
  for (const d of divergences.slice(0, limit)) console.log(`  ${describeDivergence(d)}`);
  if (divergences.length > limit) console.log(`  … and ${divergences.length - limit} more (--json lists all)`);
}

function printSummary(s: ReplaySummary, target: ReplayTarget, inFlightOnly: boolean): void {
  const scope = `${inFlightOnly ? 'in-flight ' : ''}execution${s.streams === 1 ? '' : 's'}`;
  console.log(`${s.streams.toLocaleString('en')} ${scope} (${s.events.toLocaleString('en')} events${s.skipped ? `, ${s.skipped.toLocaleString('en')} passed over` : ''}) replayed against ${describeTarget(target)} in ${(s.ms / 1000).toFixed(1)} s`);
  printVerdictTail(s.divergences, inFlightOnly ? 'no in-flight execution would break' : 'no divergence', 50);
  if (s.divergentStreams > 0) console.log(`${s.divergentStreams.toLocaleString('en')} execution(s) would break${inFlightOnly ? ': do not deploy this machine while they are in flight' : ''}`);
}

export interface ReplayOptions {
  all?: boolean;
  inFlight?: boolean;
  since?: Date;
  file?: string;
  against: string;
  json?: boolean;
}

export async function replayCommand(id: string | undefined, o: ReplayOptions): Promise<void> {
  const sources = [id !== undefined, o.all === true, o.inFlight === true, o.file !== undefined].filter(Boolean).length;
  if (sources !== 1) throw new BatonError('replay: give exactly one of <id>, --all, --in-flight or --file <history.json>');
  if (o.since && !(o.all || o.inFlight)) throw new BatonError('replay: --since goes with --all or --in-flight');
  const target = await loadReplayTarget(o.against);

  const one = (executionId: string, events: HistoryEvent[]) => {
    const { steps, verdict } = replayHistory(executionId, events, target);
    if (o.json) console.log(toJson({ executionId, against: describeTarget(target), steps, divergences: verdict.divergences }));
    else printStreamReplay(executionId, target, steps, verdict);
    if (verdict.divergences.length > 0) process.exitCode = 1;
  };

  if (o.file !== undefined) {
    const doc = await readHistoryFile(o.file);
    return one(doc.executionId, doc.events);
  }
  await readContext(async ({ store, pool }) => {
    if (id !== undefined) return one(id, await executionHistory(store, pool, id));
    const inFlightOnly = o.inFlight === true;
    const progress = progressLine(inFlightOnly ? 'checking in-flight executions' : 'replaying', await countEvents(pool, [EXECUTION_STREAM_PREFIX]));
    const summary = await replayStore({ store, target, since: o.since, inFlightOnly, onProgress: (n) => progress.update(n) });
    progress.finish(`${summary.events.toLocaleString('en')} events in ${(summary.ms / 1000).toFixed(1)} s`);
    if (o.json) console.log(toJson({ against: describeTarget(target), ...summary }));
    else printSummary(summary, target, inFlightOnly);
    if (summary.divergences.length > 0) process.exitCode = 1;
  });
}

export interface InspectOptions {
  file?: string;
  at?: InspectPoint;
  forkAt?: number;
  event?: ForkEventInput[];
  json?: boolean;
}

export async function inspectCommand(id: string, o: InspectOptions): Promise<void> {
  if (o.event && o.forkAt === undefined) throw new BatonError('inspect: --event goes with --fork-at <revision>');
  if (o.forkAt !== undefined && !o.event) throw new BatonError('inspect: --fork-at needs at least one --event \'{"type":…,"data":…}\' to try');
  if (o.forkAt !== undefined && o.at) throw new BatonError('inspect: give --at or --fork-at, not both');
  // An archived execution is read from its archive file; --file reads any history with no database.
  const steps = o.file !== undefined ? await fileTimeline(id, o.file) : await readContext(async ({ store, pool }) => timeline(id, await executionHistory(store, pool, id)));
  if (o.forkAt !== undefined) {
    stepAt(steps, { revision: o.forkAt }, '--fork-at'); // past this history: refused naming the option
    const fork = forkExecution(steps, o.forkAt, o.event!);
    if (o.json) console.log(toJson(fork));
    else printFork(id, fork);
    if (!fork.ok) process.exitCode = 1;
    return;
  }
  const step = stepAt(steps, o.at ?? { revision: steps.at(-1)!.revision }, '--at');
  if (!step) throw new BatonError(`inspect: nothing was recorded at or before ${(o.at as { at: Date }).at.toISOString()}; the first event was recorded at ${steps[0]!.recordedAt}`);
  if (o.json) console.log(toJson({ executionId: id, ...step }));
  else printInspect(id, steps, step);
}


async function fileTimeline(id: string, file: string): Promise<TimelineStep[]> {
  const doc = await readHistoryFile(file);
  if (doc.executionId !== id) throw new BatonError(`inspect: ${file} holds execution ${doc.executionId}, not ${id}`);
  return timeline(id, doc.events);
}

export async function exportCommand(id: string): Promise<void> {
  await readContext(async ({ store, pool }) => {
    console.log(toJson(toHistoryDocument(id, await executionHistory(store, pool, id))));
  });
}
