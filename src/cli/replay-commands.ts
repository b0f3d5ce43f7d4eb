// `baton inspect`, `baton replay` and `baton export`: time-travel, replay against a machine
// (current, recorded or a candidate module) and portable histories. Replaying a file opens
// no database.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { ForkEventInput, InspectPoint } from '../replay/inspect.ts';
import { dateTimeOption, executionIdOrPointer, jsonOption } from './arguments.ts';
import { InvalidInputError } from '../input/errors.ts';
import { repeatable } from './repeated-options.ts';

// A workflow's id is pointed to `baton workflow status`, as `baton status` does.
const executionId = executionIdOrPointer('workflow status');

const revisionOf = (option: string) => (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value)) throw new InvalidInputError([{ path: option, message: `must be a revision (0, 1, 2, …), got "${value}"` }]);
  // Whole but past any history (a stream's revisions are counted in JavaScript numbers): say that.
  if (!Number.isSafeInteger(n)) throw new InvalidInputError([{ path: option, message: `must be a revision from 0 to the history's last, got ${value}, past any history` }]);
  return n;
};
const revision = revisionOf('--fork-at');
const atRevision = revisionOf('--at');
const sinceTime = dateTimeOption('--since');
const atTime = dateTimeOption('--at');
// A number (digits, a sign, a point) means a revision, refused unless whole; anything else, a time.
const inspectPoint = (value: string): InspectPoint => (/^[-+]?[\d.]+$/.test(value) ? { revision: atRevision(value) } : { at: atTime(value) });
const eventJson = jsonOption('--event');
const forkEvent = repeatable((value: string, previous: ForkEventInput[] = []): ForkEventInput[] => {
  const parsed: unknown = eventJson(value).json;
  if (typeof parsed !== 'object' || parsed === null || typeof (parsed as ForkEventInput).type !== 'string') {
    throw new InvalidArgumentError('must be a JSON object with a "type" (and "data", optionally "by"), e.g. \'{"type":"ExecutionFailed","data":{"error":{"message":"boom"},"retryable":false}}\'');
  }
  return [...previous, parsed as ForkEventInput];
});

export function registerReplayCommands(program: Command): void {
  program
    .command('inspect')
    .description("time-travel: an execution's state at a revision or instant (default: now), with the event that led there and what could come next; or a what-if fork. An archived execution is read from its archive file")
    .argument('<id>', 'execution id', executionId)
    .option('--file <history.json>', 'read the history from a file (`baton export`, or an archive file written by `baton retention run`) instead of the store')
    .option('--at <revision|time>', 'a revision (0, 1, …) or an ISO time: the state after the last event recorded by then', inspectPoint)
    .option('--fork-at <revision>', 'what-if: continue from this revision with the --event(s) instead, through the machine only (writes nothing)', revision)
    .option('--event <json>', 'with --fork-at: an event to try, e.g. \'{"type":"ExecutionFailed","data":{"error":{"message":"boom"},"retryable":false}}\' ("by" defaults to the owner); repeatable', forkEvent)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/replay.ts')).inspectCommand(id, o));

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
    .action(async (id: string | undefined, o) => (await import('./run/replay.ts')).replayCommand(id, o));

  program
    .command('export')
    .description("write an execution's whole history as portable JSON (for `baton replay --file` or a regression test)")
    .argument('<id>', 'execution id', executionId)
    // Every command takes --json; export prints nothing else, so it changes nothing here.
    .option('--json', 'print JSON (already JSON: accepted for scripts that pass it to every command)')
    .action(async (id: string) => (await import('./run/replay.ts')).exportCommand(id));
}
