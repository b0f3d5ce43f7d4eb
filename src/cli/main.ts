// `baton` — the command line. This module and the register* modules only define the commands:
// each command's action imports the code that runs it (src/cli/run/) when it runs, so
// `baton --help` loads commander and little else, and `baton status` loads the store and the
// machine but not the API, the hosts or the benchmarks. Measured from dist/ on the 2-core dev
// machine: with every command's code imported up front, `baton --help` took ~1 s (graphql-yoga
// alone ~0.4 s, the EventStoreDB client ~0.16 s); defined this way it takes 0.16 s of CPU, bare
// `node -e 0` 0.1 s, and `baton status <id>` 0.43 s.
import { readFileSync } from 'node:fs';
import { printable } from './format.ts';
import { Command, Option } from 'commander';
import type { ExecutionStatus } from '../../actors/execution.machine.ts';
import { dateTimeOption, executionIdOrPointer, integerOption, jsonOption, tagOption } from './arguments.ts';
import { BatonError } from '../errors.ts';
import { durationMsArg, filterText, givenOption, intFrom, listenHostArg, namespaceName, namespaceNames, portArg, positiveInt, shutdownTimeoutArg, workerIdArg } from './options.ts';

/** A worker's concurrent runs: WorkerStarted's limit (schemas/worker-events.ts). */
const capacityArg = intFrom(1, 100_000);
import { registerVerifyCommand } from './verify-command.ts';
import { registerDlqCommand } from './dlq-command.ts';
import { registerReplayCommands } from './replay-commands.ts';
import { registerCancelCommand } from './cancel-command.ts';
import { registerWorkflowCommands } from './workflow-commands.ts';
import { registerEventStoreCommands } from './eventstore-command.ts';
import { registerRetentionCommands } from './retention-command.ts';
import { registerScheduleCommands } from './schedule-commands.ts';
import { registerRateLimitCommands } from './ratelimit-command.ts';
import { setCliCommand } from './command-name.ts';
import { refuseRepeatedOptions } from './repeated-options.ts';

/** package.json's version: the nearest package.json above this file (src/cli/ or dist/src/cli/). */
function packageVersion(): string {
  for (let dir = new URL('./', import.meta.url); dir.pathname !== '/'; dir = new URL('../', dir)) {
    try {
      return (JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { version: string }).version;
    } catch {
      // not here: one folder up
    }
  }
  return 'unknown';
}

const program = new Command('baton')
  .description('Baton: event-sourced executions with explicit ownership.\nWithout BATON_DATABASE_URL, Baton runs an embedded Postgres under ./.baton/.')
  .version(packageVersion(), '-V, --version', 'print the version')
  // A subcommand's options after its name are its own: `baton bench eventstore --json` is the
  // eventstore benchmark's --json, not `bench`'s (commander gives them to the parent otherwise).
  .enablePositionalOptions()
  // A hint, not the whole help: a mistyped option or a value out of range stays on the screen
  // as the error and one line, not above forty lines of usage (`--batch-size 0` printed them all).
  .showHelpAfterError('(add --help for usage)')
  // commander's errors quote the argument: a control character in it (ESC) would reach the terminal as one.
  .configureOutput({ outputError: (text, write) => write(printable(text)) })
  // The command's log lines carry its name as their component (command-name.ts).
  .hook('preAction', (_program, action) => {
    const names: string[] = [];
    for (let c: Command | null = action; c?.parent; c = c.parent) names.unshift(c.name());
    setCliCommand(names);
  });

program
  .command('submit')
  .description('request an execution of an action (checked as the API checks it: a known action, input that fits its schema), or many from an NDJSON file')
  .argument('[action]', 'action name, e.g. core.noop; name@version (core.echo@2) pins a version (not with --file)')
  .option('--input <json>', 'action input as JSON (default: null)', jsonOption('--input'))
  .option('--actions <module>', 'a module exporting more actions, so theirs can be submitted (the built-ins are always known)')
  .option('--key <key>', 'idempotency key: the same key and request return the first execution')
  .option('--max-attempts <n>', 'attempts before the execution is abandoned (1 to 1000)', integerOption('--max-attempts'))
  .option('--priority <n>', 'higher is scheduled first, first come first served within a priority (an integer from -2147483648 to 2147483647, default 0)', integerOption('--priority'))
  .option('--namespace <name>', 'the namespace it lives in (default: $BATON_NAMESPACE, or default); created on first use', namespaceName)
  .option('--action-version <n>', 'run every attempt on this version of the action (a whole number from 1; default: the newest a live worker offers)', integerOption('--action-version'))
  .option('--tag <key=value>', 'a tag to find it by (`baton list --tag`), repeatable; with --file, added to every line', tagOption('--tag'))
  .option('--file <path>', 'submit one request per line of this NDJSON file (`-`: stdin): {"action", "input"?, "idempotencyKey"?, "maxAttempts"?, "priority"?, "tags"?, "actionVersion"?, "namespace"?}')
  .addOption(new Option('--batch-size <n>', 'with --file: lines per batch (one transaction each), 1 to 1000').argParser(intFrom(1, 1_000)).default(500))
  .option('--wait', 'wait until the execution reaches a final state and print its result (exit 1 unless Completed)')
  .option('--timeout <ms>', 'with --wait: give up after this long (exit 2; at most 7 days)', durationMsArg)
  .option('--json', 'print JSON')
  .action(async (action: string | undefined, o, cmd: Command) => {
    if (o.file === undefined) {
      if (action === undefined) throw new BatonError('submit: give an action (`baton submit core.noop`) or --file <ndjson>');
      if (cmd.getOptionValueSource('batchSize') === 'cli') throw new BatonError('submit: --batch-size works with --file only (a single submission is one append)');
      return (await import('./run/submit.ts')).submitCommand(action, o);
    }
    if (action !== undefined) throw new BatonError(`submit: give an action or --file, not both (each line of the file names its action)`);
    const long = (k: string) => cmd.options.find((opt) => opt.attributeName() === k)!.long;
    const waits = ['wait', 'timeout'].filter((k) => o[k] !== undefined);
    if (waits.length > 0) throw new BatonError(`submit --file: ${waits.map(long).join(' and ')} work${waits.length === 1 ? 's' : ''} with a single submission only; a file's executions are listed by --json (follow one with \`baton status <id>\`, or many with \`baton list --tag\` and a --tag given here)`);
    // Each of these is a field of the line's JSON object (FIELDS in run/submit-file.ts).
    const lineField: Record<string, string> = { input: 'input', key: 'idempotencyKey', maxAttempts: 'maxAttempts', priority: 'priority', actionVersion: 'actionVersion' };
    const single = Object.keys(lineField).filter((k) => o[k] !== undefined);
    if (single.length > 0) throw new BatonError(`submit --file: ${single.map(long).join(', ')} belong${single.length === 1 ? 's' : ''} on each line of the file, as ${single.map((k) => `"${lineField[k]}"`).join(', ')}, not on the command line`);
    return (await import('./run/submit-file.ts')).submitFileCommand(o.file, { actions: o.actions, tags: o.tag, batchSize: o.batchSize, json: o.json, ...(o.namespace !== undefined && { namespace: o.namespace }) });
  });

program
  .command('status')
  .description("show an execution's current state")
  .argument('<id>', 'execution id', executionIdOrPointer('workflow status'))
  .option('--json', 'print JSON')
  .action(async (id: string, o) => (await import('./run/executions.ts')).statusCommand(id, o));

program
  .command('events')
  .description("list an execution's events with the state each one led to")
  .argument('<id>', 'execution id', executionIdOrPointer('workflow status'))
  .option('--json', 'print JSON')
  .action(async (id: string, o) => (await import('./run/executions.ts')).eventsCommand(id, o));

// The machine's states, listed here so that defining the command does not load the machine;
// `unlisted` stops compiling when a state is added there and not here.
const EXECUTION_STATUSES = ['Requested', 'Scheduling', 'Scheduled', 'Running', 'Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned'] as const satisfies readonly ExecutionStatus[];
const unlisted: [Exclude<ExecutionStatus, (typeof EXECUTION_STATUSES)[number]>] extends [never] ? true : never = true;
void unlisted;

program
  .command('list')
  .description('executions from the read model, newest first, with filters; a full page ends with the cursor of the next (the projector keeps the read model current)')
  .addOption(new Option('--status <status>', 'only executions in this state').choices(EXECUTION_STATUSES))
  .option('--action <name>', 'only executions of this action', filterText(500))
  .option('--worker <id>', 'only executions held (now or last) by this worker', filterText(500))
  .option('--since <time>', 'only executions requested at or after this ISO time', dateTimeOption('--since'))
  .option('--until <time>', 'only executions requested before this ISO time', dateTimeOption('--until'))
  .option('--namespace <name>', 'only executions of this namespace (default: every namespace)', namespaceName)
  .option('--tag <key=value>', 'only executions with this tag (repeatable: every one)', tagOption('--tag'))
  .addOption(new Option('--limit <n>', 'executions per page, 1 to 1000').argParser(intFrom(1, 1000)).default(50))
  .option('--after <cursor>', 'the page after this cursor (the one a full page ends with; a GraphQL endCursor works too)')
  .option('--json', 'print JSON: { executions, nextCursor }')
  .action(async (o) => (await import('./run/list.ts')).listCommand(o));

const transportOption = () =>
  new Option('--transport <kind>', 'work transport (default: nats when BATON_NATS_URL is set, else postgres)').choices(['nats', 'postgres']);
const hostOption = () => new Option('--metrics-host <address>', 'address for /healthz and /metrics (0.0.0.0 in a container)').argParser(listenHostArg).default('127.0.0.1');
const portNumber = portArg;
const portOption = (fallback: number) =>
  new Option('--metrics-port <port>', '/healthz and /metrics port on 127.0.0.1 (0 picks a free one)').argParser(portNumber).default(fallback);
const apiPortOption = () => new Option('--port <port>', 'GraphQL API port (default: BATON_API_PORT or 4000; 0 picks a free one)').argParser(portNumber);

program
  .command('dev')
  .description('run everything in one process on the embedded default: Postgres, work queue, executor and workers')
  .addOption(new Option('--workers <n>', 'worker hosts').argParser(positiveInt).default(2))
  .addOption(new Option('--capacity <n>', 'concurrent runs per worker (1 to 100000)').argParser(capacityArg).default(10))
  .addOption(new Option('--transport <kind>', 'work transport').choices(['nats', 'postgres']).default('postgres'))
  .option('--actions <module>', 'a module exporting more actions (besides the built-ins)')
  .addOption(portOption(9464))
  .addOption(hostOption())
  .addOption(new Option('--shutdown-timeout <ms>', 'on Ctrl-C, wait this long for runs to finish (default: BATON_SHUTDOWN_TIMEOUT, 30 s)').argParser(shutdownTimeoutArg))
  .addOption(apiPortOption())
  .action(async (o: { workers: number; capacity: number; transport: 'nats' | 'postgres'; actions?: string; metricsPort: number; metricsHost: string; shutdownTimeout?: number; port?: number }, cmd: Command) =>
    (await import('./dev.ts')).runDev({ ...o, shutdownTimeoutMs: o.shutdownTimeout, apiPort: o.port, apiPortSetting: givenOption(cmd, 'port', '--port'), metricsPortSetting: givenOption(cmd, 'metricsPort', '--metrics-port') }),
  );

program
  .command('executor')
  .description('run an executor: schedules executions to workers, retries, re-publishes lost handoffs')
  .addOption(transportOption())
  .addOption(portOption(9464))
  .addOption(hostOption())
  .action(async (o: { transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string }, cmd: Command) =>
    (await import('./host-commands.ts')).runExecutor({ ...o, metricsPortSetting: givenOption(cmd, 'metricsPort', '--metrics-port') }),
  );

program
  .command('worker')
  .description('run a worker: pulls its work, runs actions, appends outcomes; SIGTERM drains')
  .option('--id <id>', 'worker id (default: <hostname>-<pid>)', workerIdArg)
  .option('--actions <module>', 'a module exporting actions (besides the built-ins)')
  .addOption(new Option('--capacity <n>', 'concurrent runs (1 to 100000)').argParser(capacityArg).default(10))
  .option('--namespaces <a,b>', 'run only executions of these namespaces (default: every namespace)', namespaceNames)
  .addOption(transportOption())
  .addOption(portOption(9465))
  .addOption(hostOption())
  .addOption(new Option('--shutdown-timeout <ms>', 'on SIGTERM, wait this long for runs to finish (default: BATON_SHUTDOWN_TIMEOUT, 30 s)').argParser(shutdownTimeoutArg))
  .action(async (o: { id?: string; actions?: string; capacity: number; namespaces?: string[]; transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string; shutdownTimeout?: number }, cmd: Command) =>
    (await import('./host-commands.ts')).runWorker({ ...o, metricsPortSetting: givenOption(cmd, 'metricsPort', '--metrics-port') }),
  );

program
  .command('projector')
  .description('run the projector: keeps the read model (baton_read.*) up to date from the events')
  .addOption(portOption(9466))
  .addOption(hostOption())
  .action(async (o: { metricsPort: number; metricsHost: string }, cmd: Command) =>
    (await import('./host-commands.ts')).runProjector({ ...o, metricsPortSetting: givenOption(cmd, 'metricsPort', '--metrics-port') }),
  );

program
  .command('api')
  .description('serve the GraphQL API (and GraphiQL) at /graphql over the read model')
  .addOption(apiPortOption())
  .option('--actions <module>', 'a module exporting more actions, so submitExecution can check their input')
  .addOption(portOption(9467))
  .addOption(hostOption())
  .action(async (o: { port?: number; actions?: string; metricsPort: number; metricsHost: string }, cmd: Command) =>
    (await import('./host-commands.ts')).runApi({ ...o, metricsPortSetting: givenOption(cmd, 'metricsPort', '--metrics-port') }),
  );

program
  .command('migrate')
  .description('bring the database up to date for this build (every process does as it opens it, unless BATON_MIGRATE=off)')
  .option('--check', 'only list what is pending; exit 1 when anything is')
  .option('--json', 'print JSON')
  .action(async (o: { check?: boolean; json?: boolean }) => (await import('./run/migrate.ts')).migrateCommand(o));

const projectionsCommand = program.command('projections').description('inspect, rebuild and verify the read model');
projectionsCommand
  .command('status')
  .description('where each projection is, and how far behind')
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/projections.ts')).projectionsStatusCommand(o));

projectionsCommand
  .command('rebuild')
  .description('rebuild projections from position 0 aside, then swap them in (the API keeps serving)')
  .argument('[name]', 'one projection (default: all; `baton projections status` lists them)')
  .action(async (name: string | undefined) => (await import('./run/projections.ts')).projectionsRebuildCommand(name));

projectionsCommand
  .command('verify')
  .description('rebuild into a scratch schema and compare with the live read model; exit 1 on any difference')
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/projections.ts')).projectionsVerifyCommand(o));

const bench = program
  .command('bench')
  .description('end-to-end benchmark: executor and workers in this process, the projector in its own (as deployed) or here too, full event history (scratch database, dropped afterwards)')
  .addOption(new Option('--executions <n>', 'executions for the throughput run').argParser(positiveInt).default(10_000))
  .addOption(new Option('--concurrency <n>', 'runs at once across all workers').argParser(positiveInt).default(64))
  .addOption(new Option('--workers <n>', 'worker hosts').argParser(positiveInt).default(2))
  .addOption(new Option('--latency-samples <n>', 'executions submitted one at a time for pickup latency').argParser(positiveInt).default(200))
  .addOption(new Option('--latency-interval <ms>', 'from one of those submissions to the next, as a trickle of work arrives (0: each as soon as the previous started)').argParser(intFrom(0, 60_000)).default(20))
  .addOption(new Option('--transport <kind>', 'work transport').choices(['nats', 'postgres']).default('postgres'))
  .addOption(new Option('--projector <where>', 'the projector in a `baton projector` process of its own, as deployed, or in this process as `baton dev` runs it').choices(['process', 'in-process']).default('process'))
  .addOption(new Option('--eager-dispatch <switch>', 'start handoffs to the in-process workers in the same append, without the transport, as `baton dev` does (off: every run goes through the transport); default BATON_EAGER_DISPATCH, on').choices(['on', 'off']))
  .addOption(new Option('--history <n>', 'finished executions stored and projected before the run (5 events each), so it runs on a store with that much history').argParser(intFrom(0, 10_000_000)).default(0))
  .addOption(new Option('--input-bytes <n>', "about how many bytes of JSON each throughput execution's input holds (a list of small records, as a job's payload often is); 0: no input").argParser(intFrom(0, 100_000)).default(0))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).endToEndBenchCommand(o));
bench
  .command('eventstore')
  .description('append throughput (1, 8 and 32 concurrent appenders, one statement per append and group commit; appendMany) and rehydration time')
  .addOption(new Option('--seconds <n>', 'duration of each append phase').argParser(positiveInt).default(3))
  .addOption(new Option('--large-history <events>', 'events in the long execution rehydrated last').argParser(intFrom(1_000, 1_000_000)).default(100_000))
  .addOption(new Option('--streams <n>', 'most appenders at once (phases run 1, 8 and this many; each takes a connection without group commit)').argParser(intFrom(1, 256)).default(32))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).eventStoreBenchCommand(o));

bench
  .command('projections')
  .description('projector speed: catch-up from position 0 per projection, and live lag under a steady load')
  .addOption(new Option('--executions <n>', 'execution histories to catch up on').argParser(positiveInt).default(20_000))
  .addOption(new Option('--live-seconds <n>', 'duration of the live phase').argParser(positiveInt).default(10))
  .addOption(new Option('--live-rate <n>', 'executions appended per second in the live phase').argParser(positiveInt).default(300))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).projectionBenchCommand(o));

bench
  .command('submit')
  .description('submission speed: single submits with many in flight, and bulk submits (submitMany) in batches')
  .addOption(new Option('--seconds <n>', 'duration of each phase').argParser(positiveInt).default(5))
  .addOption(new Option('--in-flight <n>', 'single submits in flight at once').argParser(intFrom(1, 256)).default(32))
  .addOption(new Option('--batch-size <n>', 'submissions per bulk call').argParser(intFrom(1, 10_000)).default(500))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).submitBenchCommand(o));

bench
  .command('replay')
  .description('how fast `baton replay --all` checks the store: replay every stream against the current and the recorded machines')
  .addOption(new Option('--executions <n>', 'execution histories (5 events each)').argParser(positiveInt).default(17_000))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).replayBenchCommand(o));

bench
  .command('retention')
  .description('how fast `baton retention run` archives and removes finished executions (archive files in a temporary directory)')
  .addOption(new Option('--executions <n>', 'finished execution histories (5 events each)').argParser(positiveInt).default(5_000))
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).retentionBenchCommand(o));

bench
  .command('start')
  .description('executor host ready time and memory on a store with many finished executions: following from position 0 against starting from the checkpoint')
  .addOption(new Option('--finished <n>', 'finished execution histories (5 events each)').argParser(positiveInt).default(20_000))
  .addOption(new Option('--live <n>', 'executions in flight (requested, waiting)').argParser(positiveInt).default(1_000))
  .option('--verbose', "the hosts' own log lines on stderr")
  .option('--json', 'print JSON')
  .action(async (o) => (await import('./run/bench.ts')).startBenchCommand(o));

registerVerifyCommand(program);
registerDlqCommand(program);
registerReplayCommands(program);
registerCancelCommand(program);
registerWorkflowCommands(program);
registerEventStoreCommands(program);
registerRetentionCommands(program);
registerScheduleCommands(program);
registerRateLimitCommands(program);
// Every command is defined: a single-valued option given twice is refused, not silently the last.
refuseRepeatedOptions(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof BatonError) {
    process.stderr.write(`baton: ${err.message}\n`);
    process.exitCode = 1;
  } else {
    throw err;
  }
}
