// `baton inspect`, `baton replay` and `baton export`: time-travel, replay against a machine
// (current, recorded or a candidate module) and portable histories. Replaying a file opens
// no database.
import { Command, InvalidArgumentError, Option } from 'commander';
import { dateTimeOption, executionId, jsonOption } from './arguments.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { BatonError } from '../errors.ts';
import { countEvents } from '../eventstore/postgres.ts';
import { readHistoryFile, toHistoryDocument, type HistoryEvent } from '../replay/history.ts';
import { forkExecution, stepAt, timeline, type ForkEventInput, type ForkResult, type InspectPoint, type TimelineStep } from '../replay/inspect.ts';
import { describeDivergence, describeTarget, replayHistory, type ReplayStep, type ReplayTarget, type StreamVerdict } from '../replay/replay.ts';
import { replayStore, type ReplaySummary } from '../replay/replay-store.ts';
import { loadReplayTarget } from '../replay/replay-target.ts';
import { withContext } from './context.ts';
import { fields, table, toJson } from './format.ts';
import { progressLine } from './progress.ts';

const revision = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a revision (0, 1, 2, …)');
  return n;
};
const sinceTime = dateTimeOption('--since');
const atTime = dateTimeOption('--at');
const inspectPoint = (value: string): InspectPoint => (/^\d+$/.test(value) ? { revision: Number(value) } : { at: atTime(value) });
const eventJson = jsonOption('--event');
const forkEvent = (value: string, previous: ForkEventInput[] = []): ForkEventInput[] => {
  const parsed: unknown = eventJson(value).json;
  if (typeof parsed !== 'object' || parsed === null || typeof (parsed as ForkEventInput).type !== 'string') {
    throw new InvalidArgumentError('must be a JSON object with a "type" (and "data", optionally "by"), e.g. \'{"type":"ExecutionFailed","data":{"error":{"message":"boom"},"retryable":false}}\'');
  }
  return [...previous, parsed as ForkEventInput];
};

const show = (v: unknown) => (v === undefined ? '' : JSON.stringify(v));

function printInspect(id: string, steps: readonly TimelineStep[], step: TimelineStep): void {
  const c = step.context;
  console.log(
    fields([
      ['execution', id],
      ['revision', `${step.revision} of ${steps.at(-1)!.revision}${step.final ? ' (final)' : ''}`],
      ['event', `${step.type} by ${step.by}, occurred ${step.occurredAt}, recorded ${step.recordedAt}${step.machineVersion ? `, machine v${step.machineVersion}` : ''}`],
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

const stepRow = (s: ReplayStep) => [
  String(s.revision),
  s.type,
  s.by,
  `${s.before ?? '–'} → ${s.after ?? (s.divergence ? 'REFUSED' : '(not replayed)')}`,
  s.owner ?? '',
  s.divergence ? `DIVERGES (recorded ${s.expected ?? '?'})` : '',
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

interface ReplayOptions {
  all?: boolean;
  inFlight?: boolean;
  since?: Date;
  file?: string;
  against: string;
  json?: boolean;
}

async function replayCommand(id: string | undefined, o: ReplayOptions): Promise<void> {
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
  await withContext(async ({ runtime, store, pool }) => {
    if (id !== undefined) return one(id, await runtime.readHistory(id));
    const inFlightOnly = o.inFlight === true;
    const progress = progressLine(inFlightOnly ? 'checking in-flight executions' : 'replaying', await countEvents(pool, [EXECUTION_STREAM_PREFIX]));
    const summary = await replayStore({ store, target, since: o.since, inFlightOnly, onProgress: (n) => progress.update(n) });
    progress.finish(`${summary.events.toLocaleString('en')} events in ${(summary.ms / 1000).toFixed(1)} s`);
    if (o.json) console.log(toJson({ against: describeTarget(target), ...summary }));
    else printSummary(summary, target, inFlightOnly);
    if (summary.divergences.length > 0) process.exitCode = 1;
  });
}

interface InspectOptions {
  at?: InspectPoint;
  forkAt?: number;
  event?: ForkEventInput[];
  json?: boolean;
}

async function inspectCommand(id: string, o: InspectOptions): Promise<void> {
  if (o.event && o.forkAt === undefined) throw new BatonError('inspect: --event goes with --fork-at <revision>');
  if (o.forkAt !== undefined && !o.event) throw new BatonError('inspect: --fork-at needs at least one --event \'{"type":…,"data":…}\' to try');
  if (o.forkAt !== undefined && o.at) throw new BatonError('inspect: give --at or --fork-at, not both');
  const steps = await withContext(async ({ runtime }) => timeline(id, await runtime.readHistory(id)));
  if (o.forkAt !== undefined) {
    const fork = forkExecution(steps, o.forkAt, o.event!);
    if (o.json) console.log(toJson(fork));
    else printFork(id, fork);
    if (!fork.ok) process.exitCode = 1;
    return;
  }
  const step = stepAt(steps, o.at ?? { revision: steps.at(-1)!.revision });
  if (!step) throw new BatonError(`inspect: nothing was recorded at or before ${(o.at as { at: Date }).at.toISOString()}; the first event was recorded at ${steps[0]!.recordedAt}`);
  if (o.json) console.log(toJson({ executionId: id, ...step }));
  else printInspect(id, steps, step);
}

export function registerReplayCommands(program: Command): void {
  program
    .command('inspect')
    .description("time-travel: an execution's state at a revision or instant (default: now), with the event that led there and what could come next; or a what-if fork")
    .argument('<id>', 'execution id', executionId)
    .option('--at <revision|time>', 'a revision (0, 1, …) or an ISO time: the state after the last event recorded by then', inspectPoint)
    .option('--fork-at <revision>', 'what-if: continue from this revision with the --event(s) instead, through the machine only (writes nothing)', revision)
    .option('--event <json>', 'with --fork-at: an event to try, e.g. \'{"type":"ExecutionFailed","data":{"error":{"message":"boom"},"retryable":false}}\' ("by" defaults to the owner); repeatable', forkEvent)
    .option('--json', 'print JSON')
    .action(inspectCommand);

  program
    .command('replay')
    .description('re-fold stored histories through a machine and report every divergence from what was recorded; exit 1 on any')
    .argument('[id]', 'one execution, printed step by step', executionId)
    .option('--all', 'every execution in the store, with a progress bar and a summary')
    .option('--in-flight', 'every execution not yet final: the deploy gate (use with --against <module>)')
    .option('--since <time>', 'with --all/--in-flight: only executions requested at or after this ISO time', sinceTime)
    .option('--file <history.json>', 'a history written by `baton export` (no database needed)')
    .addOption(new Option('--against <machine>', '`current`, `recorded` (the version each event was written by) or a module exporting a candidate executionMachine').default('current'))
    .option('--json', 'print JSON')
    .action(replayCommand);

  program
    .command('export')
    .description("write an execution's whole history as portable JSON (for `baton replay --file` or a regression test)")
    .argument('<id>', 'execution id', executionId)
    .action(async (id: string) => {
      await withContext(async ({ runtime }) => {
        console.log(toJson(toHistoryDocument(id, await runtime.readHistory(id))));
      });
    });
}
