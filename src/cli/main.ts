// `baton` — the command line.
import { Command, InvalidArgumentError, Option } from 'commander';
import { executionId, integerOption, jsonOption, type JsonOptionValue } from './arguments.ts';
import { checkSubmission, type SubmissionNames } from '../runtime/submission.ts';
import { statusOf } from '../../actors/execution.machine.ts';
import { BatonError } from '../errors.ts';
import { withContext } from './context.ts';
import { waitForFinal } from './wait.ts';
import { defaultWorkerId, describeDev, loadActions, openHostEnvironment, runUntilSignalled, startApi, startDev, startExecutorHost, startWorker } from './hosts.ts';
import { createActionRegistry } from '../actions/index.ts';
import { startHealthServer } from '../observability/http.ts';
import { fields, table, toJson } from './format.ts';
import { runEventStoreBench, printEventStoreBench } from '../bench/eventstore.ts';
import { runEndToEndBench, printEndToEndBench } from '../bench/end-to-end.ts';
import { runProjectionBench, printProjectionBench } from '../bench/projections.ts';
import { runReplayBench, printReplayBench } from '../bench/replay.ts';
import { projections, type Projection } from '../../projections/index.ts';
import { readCheckpoints } from '../readmodel/checkpoints.ts';
import { startProjector } from '../readmodel/projector-host.ts';
import { rebuildProjection } from '../readmodel/rebuild.ts';
import { verifyReadModel } from '../readmodel/verify.ts';
import { progressLine } from './progress.ts';
import { registerVerifyCommand } from './verify-command.ts';
import { registerDlqCommand } from './dlq-command.ts';
import { registerReplayCommands } from './replay-commands.ts';
import { registerCancelCommand } from './cancel-command.ts';
import { registerWorkflowCommands } from './workflow-commands.ts';
import { registerEventStoreCommands } from './eventstore-command.ts';
import { countEvents } from '../eventstore/postgres.ts';

const program = new Command('baton')
  .description('Baton: event-sourced executions with explicit ownership.\nWithout BATON_DATABASE_URL, Baton runs an embedded Postgres under ./.baton/.')
  .showHelpAfterError();

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

/** How `baton submit` names what it takes, in the messages of the submission check. */
const SUBMIT_NAMES: SubmissionNames = { action: 'action', input: '--input', idempotencyKey: '--key', maxAttempts: '--max-attempts', priority: '--priority' };

program
  .command('submit')
  .description('request an execution of an action (checked as the API checks it: a known action, input that fits its schema)')
  .argument('<action>', 'action name, e.g. core.noop')
  .option('--input <json>', 'action input as JSON (default: null)', jsonOption('--input'))
  .option('--actions <module>', 'a module exporting more actions, so theirs can be submitted (the built-ins are always known)')
  .option('--key <key>', 'idempotency key: the same key and request return the first execution')
  .option('--max-attempts <n>', 'attempts before the execution is abandoned (1 to 1000)', integerOption('--max-attempts'))
  .option('--priority <n>', 'higher is scheduled first, first come first served within a priority (an integer from -2147483648 to 2147483647, default 0)', integerOption('--priority'))
  .option('--wait', 'wait until the execution reaches a final state and print its result (exit 1 unless Completed)')
  .option('--timeout <ms>', 'with --wait: give up after this long (exit 2)', positiveInt)
  .option('--json', 'print JSON')
  .action(async (action: string, o: { input?: JsonOptionValue; actions?: string; key?: string; maxAttempts?: number; priority?: number; wait?: boolean; timeout?: number; json?: boolean }) => {
    // Checked before the database is opened: a bad submission writes nothing and needs nothing.
    const request = checkSubmission(
      createActionRegistry(await loadActions(o.actions)),
      { action, input: o.input ? o.input.json : null, ...(o.key !== undefined && { idempotencyKey: o.key }), ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }), ...(o.priority !== undefined && { priority: o.priority }) },
      SUBMIT_NAMES,
    );
    await withContext(async ({ runtime, store }) => {
      const r = await runtime.submit(request);
      if (!o.wait) {
        if (o.json) console.log(toJson({ executionId: r.executionId, created: r.created, status: statusOf(r.snapshot), revision: r.revision }));
        else console.log(`${r.created ? 'submitted' : 'already submitted (same idempotency key)'}: ${r.executionId} (${statusOf(r.snapshot)})`);
        return;
      }
      if (!o.json) process.stderr.write(`submitted ${r.executionId}; waiting for it to finish …\n`);
      const done = await waitForFinal(store, runtime, r.executionId, o.timeout);
      if (!done) {
        process.stderr.write(`baton: execution ${r.executionId} did not finish within ${o.timeout} ms\n`);
        process.exitCode = 2;
        return;
      }
      const c = done.snapshot.context;
      const status = statusOf(done.snapshot);
      if (o.json) console.log(toJson({ executionId: r.executionId, status, attempt: c.attempt, result: c.result, error: c.error }));
      else if (status === 'Completed') console.log(JSON.stringify(c.result ?? null));
      else console.log(`${status}${c.error ? `: ${c.error.message}` : ''}${c.abandonReason ? `: ${c.abandonReason}` : ''}${c.cancelReason ? `: ${c.cancelReason}` : ''}`);
      if (status !== 'Completed') process.exitCode = 1;
    });
  });

program
  .command('status')
  .description("show an execution's current state")
  .argument('<id>', 'execution id', executionId)
  .option('--json', 'print JSON')
  .action(async (id: string, o: { json?: boolean }) => {
    await withContext(async ({ runtime }) => {
      const { snapshot, revision } = await runtime.load(id);
      const c = snapshot.context;
      if (o.json) {
        console.log(toJson({ executionId: id, status: statusOf(snapshot), revision, context: c }));
        return;
      }
      console.log(
        fields([
          ['execution', id],
          ['status', statusOf(snapshot)],
          ['action', c.action],
          ['owner', c.owner],
          ['worker', c.workerId],
          ['attempt', `${c.attempt} of ${c.maxAttempts}`],
          ['revision', String(revision)],
          ['requested', c.requestedAt],
          ['started', c.startedAt],
          ['finished', c.finishedAt],
          ['deadline', c.deadline],
          ['cancel requested', c.cancelRequested],
          ['result', c.result === undefined ? undefined : JSON.stringify(c.result)],
          ['error', c.error ? c.error.message : undefined],
        ]),
      );
    });
  });

program
  .command('events')
  .description("list an execution's events with the state each one led to")
  .argument('<id>', 'execution id', executionId)
  .option('--json', 'print JSON')
  .action(async (id: string, o: { json?: boolean }) => {
    await withContext(async ({ runtime }) => {
      const steps = await runtime.history(id);
      if (o.json) {
        console.log(toJson(steps.map(({ context: _context, next: _next, ...s }) => s)));
        return;
      }
      console.log(
        table(
          ['REV', 'TYPE', 'BY', 'STATE AFTER', 'RECORDED AT'],
          steps.map((s) => [String(s.revision), s.type, s.by, s.state, s.recordedAt]),
        ),
      );
    });
  });

const transportOption = () =>
  new Option('--transport <kind>', 'work transport (default: nats when BATON_NATS_URL is set, else postgres)').choices(['nats', 'postgres']);
const hostOption = () => new Option('--metrics-host <address>', 'address for /healthz and /metrics (0.0.0.0 in a container)').default('127.0.0.1');
const portNumber = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0-65535)');
  return n;
};
const portOption = (fallback: number) =>
  new Option('--metrics-port <port>', '/healthz and /metrics port on 127.0.0.1 (0 picks a free one)').argParser(portNumber).default(fallback);
const apiPortOption = () => new Option('--port <port>', 'GraphQL API port (default: BATON_API_PORT or 4000; 0 picks a free one)').argParser(portNumber);

program
  .command('dev')
  .description('run everything in one process on the embedded default: Postgres, work queue, executor and workers')
  .addOption(new Option('--workers <n>', 'worker hosts').argParser(positiveInt).default(2))
  .addOption(new Option('--capacity <n>', 'concurrent runs per worker').argParser(positiveInt).default(10))
  .addOption(new Option('--transport <kind>', 'work transport').choices(['nats', 'postgres']).default('postgres'))
  .option('--actions <module>', 'a module exporting more actions (besides the built-ins)')
  .addOption(portOption(9464))
  .addOption(hostOption())
  .addOption(new Option('--shutdown-timeout <ms>', 'on Ctrl-C, wait this long for runs to finish (default: BATON_SHUTDOWN_TIMEOUT, 30 s)').argParser(positiveInt))
  .addOption(apiPortOption())
  .action(async (o: { workers: number; capacity: number; transport: 'nats' | 'postgres'; actions?: string; metricsPort: number; metricsHost: string; shutdownTimeout?: number; port?: number }) => {
    const options = { ...o, shutdownTimeoutMs: o.shutdownTimeout, apiPort: o.port };
    const { env, hosts } = await startDev(options);
    console.log(describeDev(env, hosts, options));
    await runUntilSignalled(env, hosts);
  });

program
  .command('executor')
  .description('run an executor: schedules executions to workers, retries, re-publishes lost handoffs')
  .addOption(transportOption())
  .addOption(portOption(9464))
  .addOption(hostOption())
  .action(async (o: { transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string }) => {
    const env = await openHostEnvironment({ transport: o.transport, component: 'executor' });
    const executor = startExecutorHost(env);
    await executor.ready;
    const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
    env.log.info({ metrics: `${health.url}/metrics`, transport: env.transportKind }, 'executor running');
    await runUntilSignalled(env, { executor, workers: [], health });
  });

program
  .command('worker')
  .description('run a worker: pulls its work, runs actions, appends outcomes; SIGTERM drains')
  .option('--id <id>', 'worker id (default: <hostname>-<pid>)')
  .option('--actions <module>', 'a module exporting actions (besides the built-ins)')
  .addOption(new Option('--capacity <n>', 'concurrent runs').argParser(positiveInt).default(10))
  .addOption(transportOption())
  .addOption(portOption(9465))
  .addOption(hostOption())
  .addOption(new Option('--shutdown-timeout <ms>', 'on SIGTERM, wait this long for runs to finish (default: BATON_SHUTDOWN_TIMEOUT, 30 s)').argParser(positiveInt))
  .action(async (o: { id?: string; actions?: string; capacity: number; transport?: 'nats' | 'postgres'; metricsPort: number; metricsHost: string; shutdownTimeout?: number }) => {
    const env = await openHostEnvironment({ transport: o.transport, component: 'worker' });
    const worker = await startWorker(env, {
      workerId: o.id ?? defaultWorkerId(),
      actions: createActionRegistry(await loadActions(o.actions)),
      capacity: o.capacity,
      shutdownTimeoutMs: o.shutdownTimeout,
    });
    const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
    env.log.info({ metrics: `${health.url}/metrics`, transport: env.transportKind }, 'worker running');
    await runUntilSignalled(env, { workers: [worker], health });
  });

program
  .command('projector')
  .description('run the projector: keeps the read model (baton_read.*) up to date from the events')
  .addOption(portOption(9466))
  .addOption(hostOption())
  .action(async (o: { metricsPort: number; metricsHost: string }) => {
    const env = await openHostEnvironment({ transport: 'postgres', component: 'projector' });
    const projector = startProjector({ pool: env.db.pool, store: env.store, log: env.log, registry: env.registry });
    const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => projector.problems(), log: env.log });
    env.log.info({ metrics: `${health.url}/metrics` }, 'projector running');
    await runUntilSignalled(env, { projector, workers: [], health });
  });

program
  .command('api')
  .description('serve the GraphQL API (and GraphiQL) at /graphql over the read model')
  .addOption(apiPortOption())
  .option('--actions <module>', 'a module exporting more actions, so submitExecution can check their input')
  .addOption(portOption(9467))
  .addOption(hostOption())
  .action(async (o: { port?: number; actions?: string; metricsPort: number; metricsHost: string }) => {
    const env = await openHostEnvironment({ component: 'api' }); // its transport serves deadLetters
    const api = await startApi(env, createActionRegistry(await loadActions(o.actions)), o.port);
    const health = await startHealthServer({ host: o.metricsHost, port: o.metricsPort, registry: env.registry, problems: () => [], log: env.log });
    env.log.info({ graphql: api.url, metrics: `${health.url}/metrics` }, 'API running');
    await runUntilSignalled(env, { workers: [], api, health });
  });

const projectionsCommand = program.command('projections').description('inspect, rebuild and verify the read model');
const projectionName = (value: string): string => {
  if (!projections.some((p) => p.name === value)) {
    throw new InvalidArgumentError(`unknown projection "${value}"; one of: ${projections.map((p) => p.name).join(', ')} (action_stats is part of executions)`);
  }
  return value;
};
/**
 * Matching events in the store, for a progress bar's total; undefined (a bar without a total)
 * when the events are in EventStoreDB (BATON_EVENTSTORE_URL), which has no cheap count.
 */
const eventsFor = async (ctx: { pool: import('pg').Pool; config: { eventStoreUrl: string | undefined } }, p: Projection) =>
  ctx.config.eventStoreUrl ? undefined : countEvents(ctx.pool, p.streamPrefixes);

projectionsCommand
  .command('status')
  .description('where each projection is, and how far behind')
  .option('--json', 'print JSON')
  .action(async (o: { json?: boolean }) => {
    await withContext(async ({ pool, store }) => {
      const rows = await Promise.all(
        (await readCheckpoints(pool)).map(async (c) => {
          const p = projections.find((x) => x.name === c.projection);
          const [next] = p ? await store.readAll({ after: c.position, limit: 1, streamPrefixes: [...p.streamPrefixes] }) : [];
          return { ...c, lagSeconds: next ? (Date.now() - next.recordedAt.getTime()) / 1000 : 0, codeVersion: p?.version };
        }),
      );
      if (o.json) return console.log(toJson(rows));
      console.log(table(['PROJECTION', 'POSITION', 'EVENTS APPLIED', 'VERSION', 'LAG'], rows.map((r) => [r.projection, String(r.position), r.eventsApplied.toLocaleString('en'), r.codeVersion === r.version ? String(r.version) : `${r.version} (code: ${r.codeVersion ?? 'gone'}; rebuild)`, `${r.lagSeconds.toFixed(1)} s`])));
    });
  });

projectionsCommand
  .command('rebuild')
  .description('rebuild projections from position 0 aside, then swap them in (the API keeps serving)')
  .argument('[name]', 'one projection (default: all)', projectionName)
  .action(async (name: string | undefined) => {
    await withContext(async ({ pool, store, log, config }) => {
      for (const p of projections.filter((x) => name === undefined || x.name === name)) {
        const progress = progressLine(`rebuilding ${p.name}`, await eventsFor({ pool, config }, p));
        const r = await rebuildProjection({ pool, store, projection: p, log, onProgress: (x) => progress.update(x.events) });
        progress.finish(`${r.events.toLocaleString('en')} events in ${(r.ms / 1000).toFixed(1)} s, swapped in`);
      }
    });
  });

projectionsCommand
  .command('verify')
  .description('rebuild into a scratch schema and compare with the live read model; exit 1 on any difference')
  .option('--json', 'print JSON')
  .action(async (o: { json?: boolean }) => {
    await withContext(async ({ pool, store, config }) => {
      const counts = await Promise.all(projections.map((p) => eventsFor({ pool, config }, p)));
      const total = counts.includes(undefined) ? undefined : counts.reduce((a: number, b) => a + (b ?? 0), 0);
      const progress = progressLine('verifying', total);
      const done = new Map<string, number>();
      const report = await verifyReadModel({
        pool,
        store,
        onProgress: (x) => {
          done.set(x.projection, x.events);
          progress.update([...done.values()].reduce((a, b) => a + b, 0));
        },
      });
      progress.finish(report.ok ? 'the read model equals a rebuild from the events' : 'DIFFERENCES FOUND');
      if (o.json) console.log(toJson(report));
      else {
        for (const p of report.projections) {
          console.log(`${p.projection}: ${p.problem ?? `${p.events.toLocaleString('en')} events to position ${p.position}; rows ${Object.entries(p.rows).map(([t, n]) => `${t} ${n}`).join(', ')}`}`);
        }
        for (const d of report.differences) {
          const list = (what: string, keys: string[]) => (keys.length > 0 ? `\n  ${what}: ${keys.join(', ')}` : '');
          console.log(`${d.projection}.${d.table} differs:${list('rows that differ', d.differing)}${list('rows missing from the live table', d.missing)}${list('rows the events do not produce', d.extra)}`);
        }
      }
      if (!report.ok) process.exitCode = 1;
    });
  });

const bench = program
  .command('bench')
  .description('end-to-end benchmark: executor and workers in this process, full event history (scratch database, dropped afterwards)')
  .addOption(new Option('--executions <n>', 'executions for the throughput run').argParser(positiveInt).default(10_000))
  .addOption(new Option('--concurrency <n>', 'runs at once across all workers').argParser(positiveInt).default(64))
  .addOption(new Option('--workers <n>', 'worker hosts').argParser(positiveInt).default(2))
  .addOption(new Option('--latency-samples <n>', 'executions submitted one at a time for pickup latency').argParser(positiveInt).default(200))
  .addOption(new Option('--transport <kind>', 'work transport').choices(['nats', 'postgres']).default('postgres'))
  .option('--json', 'print JSON')
  .action(async (o: { executions: number; concurrency: number; workers: number; latencySamples: number; transport: 'nats' | 'postgres'; json?: boolean }) => {
    await withContext(async (ctx) => {
      const result = await runEndToEndBench(ctx, { ...o, natsUrl: ctx.config.natsUrl, progress: (line) => process.stderr.write(`${line}\n`) });
      console.log(o.json ? toJson(result) : printEndToEndBench(result));
    });
  });
bench
  .command('eventstore')
  .description('append throughput (1 and 64 streams, single events and batches of 6) and rehydration time')
  .addOption(new Option('--seconds <n>', 'duration of each append phase').argParser(positiveInt).default(3))
  .option('--json', 'print JSON')
  .action(async (o: { seconds: number; json?: boolean }) => {
    await withContext(async (ctx) => {
      const result = await runEventStoreBench(ctx, { seconds: o.seconds, progress: (line) => process.stderr.write(`${line}\n`) });
      console.log(o.json ? toJson(result) : printEventStoreBench(result));
    });
  });

bench
  .command('projections')
  .description('projector speed: catch-up from position 0 per projection, and live lag under a steady load')
  .addOption(new Option('--executions <n>', 'execution histories to catch up on').argParser(positiveInt).default(20_000))
  .addOption(new Option('--live-seconds <n>', 'duration of the live phase').argParser(positiveInt).default(10))
  .addOption(new Option('--live-rate <n>', 'executions appended per second in the live phase').argParser(positiveInt).default(300))
  .option('--json', 'print JSON')
  .action(async (o: { executions: number; liveSeconds: number; liveRate: number; json?: boolean }) => {
    await withContext(async (ctx) => {
      const result = await runProjectionBench(ctx, { ...o, progress: (line) => process.stderr.write(`${line}\n`) });
      console.log(o.json ? toJson(result) : printProjectionBench(result));
    });
  });

bench
  .command('replay')
  .description('how fast `baton replay --all` checks the store: replay every stream against the current and the recorded machines')
  .addOption(new Option('--executions <n>', 'execution histories (6 events each)').argParser(positiveInt).default(17_000))
  .option('--json', 'print JSON')
  .action(async (o: { executions: number; json?: boolean }) => {
    await withContext(async (ctx) => {
      const result = await runReplayBench(ctx, { ...o, progress: (line) => process.stderr.write(`${line}\n`) });
      console.log(o.json ? toJson(result) : printReplayBench(result));
    });
  });

registerVerifyCommand(program);
registerDlqCommand(program);
registerReplayCommands(program);
registerCancelCommand(program);
registerWorkflowCommands(program);
registerEventStoreCommands(program);

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
