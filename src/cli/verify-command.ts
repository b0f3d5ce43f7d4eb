// `baton verify`: check DESIGN.md's invariants over every execution in the event store, and
// that the read model equals a rebuild. Exit 1 on any violation, stuck or lost execution.
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_STUCK_AFTER_MS } from '../verify/defaults.ts';

const nonNegativeInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a whole number of milliseconds');
  return n;
};

export function registerVerifyCommand(program: Command): void {
  program
    .command('verify')
    .description('check the invariants over every execution (one terminal event each, contiguous revisions, owners only, unique idempotency keys) and that the read model equals a rebuild; exit 1 on any violation, stuck or lost execution')
    .option('--json', 'print the report as JSON')
    .option('--no-read-model', 'skip comparing the read model with a rebuild from the events')
    .option('--require-terminal', 'every execution must be final (after a drain or a test load): each one that is not is stuck')
    .addOption(
      new Option('--stuck-after <ms>', 'without --require-terminal: a non-final execution this far past its deadline (or an undecided retry) is stuck')
        .argParser(nonNegativeInt)
        .default(DEFAULT_STUCK_AFTER_MS),
    )
    .option('--expect <file>', 'execution ids that were submitted, one a line: each with no stream is lost')
    .action(async (o) => (await import('./run/verify.ts')).verifyCommand(o));
}
