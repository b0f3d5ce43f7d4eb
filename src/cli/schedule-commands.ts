// `baton schedule create | update | list | show | pause | resume | delete | trigger`: run an
// action or a workflow on a cron expression or a fixed interval. Every option goes through the
// same checks as GraphQL's createSchedule (src/schedule/schedule-request.ts), which name the
// option at fault; the executors fire the ticks (src/schedule/schedule-host.ts).
import { Option, type Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { workflowIdProblem } from '../../schemas/workflow-id.ts';
import { integerOption, jsonOption, textOption } from './arguments.ts';
import { intFrom, namespaceName } from './options.ts';

/** A schedule id: the workflow id rule (letters, digits, . _ : -). */
export const scheduleId = (value: string): string => {
  const problem = value === '' ? 'must not be empty' : workflowIdProblem(value);
  if (problem !== undefined) throw new InvalidArgumentError(`schedule id ${problem}, got "${value}"`);
  return value;
};

const MAX_REASON_LENGTH = 1_000;

function definitionOptions(cmd: Command): Command {
  return cmd
    .option('--cron <expression>', "a cron expression: 5 fields (minute hour day month weekday), or 6 with seconds first, e.g. '*/5 * * * *', or @hourly, @daily, @weekly, @monthly, @yearly")
    .option('--tz <zone>', 'with --cron: an IANA time zone, e.g. Europe/Berlin (default UTC); DST as cron handles it')
    .option('--every <duration>', 'a fixed interval instead of --cron: 30s, 5m, 1h30m, 2d (from 1s to 366d)')
    .option('--action <name>', 'the action each tick runs')
    .option('--input <json>', "the action's input as JSON (default: null)", jsonOption('--input'))
    .option('--max-attempts <n>', "attempts of each tick's execution (1 to 1000)", integerOption('--max-attempts'))
    .option('--priority <n>', "each tick's execution's priority", integerOption('--priority'))
    .option('--workflow <file>', 'a workflow definition (JSON or YAML) each tick runs, instead of --action')
    .option('--jitter <duration>', 'fire each tick up to this much later (the same delay on every executor), e.g. 10s; at most 1h')
    .option('--overlap <policy>', 'while the previous run is unfinished: skip (default), allow, or cancel-previous')
    .option('--catch-up <n>', 'after downtime, run the newest n missed ticks (0, the default, skips them all)', integerOption('--catch-up'))
    .option('--start <time>', 'no tick before this ISO time')
    .option('--end <time>', 'no tick at or after this ISO time')
    .option('--namespace <name>', "the namespace its ticks' executions live in (create's default: $BATON_NAMESPACE, or default; update keeps it unless given)", namespaceName)
    .option('--actions <module>', 'a module exporting more actions, so a schedule may run theirs (the built-ins are always known)')
    .option('--json', 'print JSON');
}

export function registerScheduleCommands(program: Command): void {
  const schedule = program.command('schedule').description('schedules: run an action or a workflow on a cron expression or a fixed interval, each tick exactly once');

  definitionOptions(
    schedule
      .command('create')
      .description('create a schedule; every problem is listed with its option and nothing is written if there is one')
      .option('--id <id>', 'the schedule id (default: a new UUID); creating the same definition under the same id again returns the first', scheduleId),
  ).action(async (o) => (await import('./run/schedule.ts')).scheduleCreateCommand(o));

  definitionOptions(
    schedule.command('update').description("change a schedule: the options given replace the current ones, the rest stay").argument('<id>', 'schedule id', scheduleId),
  ).action(async (id: string, o) => (await import('./run/schedule.ts')).scheduleUpdateCommand(id, o));

  schedule
    .command('list')
    .description('schedules from the read model, newest first (the projector keeps it current)')
    .addOption(new Option('--status <status>', 'only schedules in this state').choices(['Active', 'Paused', 'Deleted']))
    .option('--all', 'include deleted schedules')
    .addOption(new Option('--limit <n>', 'schedules per page, 1 to 1000').argParser(intFrom(1, 1000)).default(50))
    .option('--after <cursor>', 'the page after this cursor (the one a full page ends with; a GraphQL endCursor works too)')
    .option('--json', 'print JSON: { schedules, nextAfter }')
    .action(async (o) => (await import('./run/schedule.ts')).scheduleListCommand(o));

  schedule
    .command('show')
    .description('a schedule: its definition, state, how many times it fired, its latest ticks and next fire times')
    .argument('<id>', 'schedule id', scheduleId)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/schedule.ts')).scheduleShowCommand(id, o));

  for (const [name, description] of [
    ['pause', 'pause a schedule: no tick fires until it is resumed'],
    ['resume', 'resume a paused schedule: ticks fire again from now on (those that fell while paused do not)'],
    ['delete', 'delete a schedule: no tick fires any more (its history stays)'],
  ] as const) {
    const cmd = schedule.command(name).description(description).argument('<id>', 'schedule id', scheduleId);
    if (name !== 'resume') cmd.option('--reason <text>', 'why (recorded in its history)', textOption('--reason', MAX_REASON_LENGTH));
    cmd.option('--json', 'print JSON').action(async (id: string, o) => (await import('./run/schedule.ts')).scheduleChangeCommand(name, id, o));
  }

  schedule
    .command('replay')
    .description("replay a schedule's history through this build's schedule machine; exit 1 on any divergence from the recorded states")
    .argument('<id>', 'schedule id', scheduleId)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/schedule.ts')).scheduleReplayCommand(id, o));

  schedule
    .command('trigger')
    .description('fire a schedule now, outside its trigger (recorded as a manual tick); prints what it started')
    .argument('<id>', 'schedule id', scheduleId)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/schedule.ts')).scheduleTriggerCommand(id, o));
}
