// `baton eventstore copy --from <url> --to <url>`: copy every stream from one event store into
// another, resumably (a checkpoint file), with a progress bar and a summary (run/eventstore.ts).
import { Command, Option } from 'commander';
import { pathOption } from './arguments.ts';
import { positiveInt } from './options.ts';

export function registerEventStoreCommands(program: Command): void {
  const group = program.command('eventstore').description('work with whole event stores (Postgres, EventStoreDB/KurrentDB)');

  group
    .command('copy')
    .description(
      'copy every stream, with its events and their ids, from one event store into another, in the source\'s global order; ' +
        'resumable (a checkpoint file) and safe to repeat: events already in the target are recognised by id',
    )
    .requiredOption('--from <url>', 'source: postgres://user:password@host:5432/db or esdb://host:2113?tls=false (kurrentdb:// too)')
    .requiredOption('--to <url>', 'target, same forms; a Postgres target gets Baton\'s schema if it lacks it')
    .addHelpText('after', '\nBATON_DB_SCHEMA is refused here: name a schema\'s installation in its URL instead, e.g. postgres://user@host:5432/db?options=-c%20search_path%3Dtenant1')
    .option('--checkpoint <file>', 'where the resume point is kept (default: BATON_DATA_DIR/eventstore-copy-<hash of the two URLs>.json)', pathOption('file'))
    .addOption(new Option('--batch-size <n>', 'events read from the source at a time (the checkpoint is saved after each batch)').argParser(positiveInt).default(500))
    .addOption(new Option('--limit <n>', 'stop after this many events (run the command again to go on)').argParser(positiveInt))
    .option('--json', 'print the summary as JSON')
    .action(async (o) => (await import('./run/eventstore.ts')).eventStoreCopyCommand(o));
}
