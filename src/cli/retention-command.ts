// `baton retention run [--older-than 90d] [--archive <dir>] [--dry-run] [--json]`: archive and
// remove finished work older than a limit (src/retention/), with a progress bar and a summary.
import { Command, InvalidArgumentError } from 'commander';
import { parseAge, SUGGESTED_RETENTION } from '../retention/age.ts';
import { pathOption } from './arguments.ts';

const age = (value: string): number => {
  const ms = parseAge(value);
  if (ms === undefined) throw new InvalidArgumentError(`must be an age such as ${SUGGESTED_RETENTION}, 12h, 30m or 45s (at least 1s, at most 100 years)`);
  return ms;
};

const directory = pathOption('directory');

export function registerRetentionCommands(program: Command): void {
  const group = program.command('retention').description('archive and remove finished executions and workflows older than a limit');
  group
    .command('run')
    .description(
      'write every finished execution (and finished workflow with all its steps) older than the limit to the archive as a portable history ' +
        '(`baton replay --file`, `baton inspect --file`), then remove it from the event store and the read model; never one in flight',
    )
    .option('--older-than <age>', `finished longer ago than this (default: BATON_RETENTION if set, else ${SUGGESTED_RETENTION})`, age)
    .option('--archive <dir>', 'where the archive files go (default: BATON_RETENTION_ARCHIVE, else BATON_DATA_DIR/archive)', directory)
    .option('--dry-run', 'count what would be archived; change nothing')
    .option('--json', 'print the summary as JSON')
    .action(async (o) => (await import('./run/retention.ts')).retentionRunCommand(o));
}
