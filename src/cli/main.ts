// `baton` — the command line.
import { Command, InvalidArgumentError, Option } from 'commander';
import { validate as isUuid } from 'uuid';
import { statusOf } from '../../actors/execution.machine.ts';
import { BatonError } from '../errors.ts';
import { withContext } from './context.ts';
import { waitForFinal } from './wait.ts';
import { fields, table, toJson } from './format.ts';
import { runEventStoreBench, printEventStoreBench } from '../bench/eventstore.ts';

const program = new Command('baton')
  .description('Baton: event-sourced executions with explicit ownership.\nWithout BATON_DATABASE_URL, Baton runs an embedded Postgres under ./.baton/.')
  .showHelpAfterError();

const jsonInput = (value: string): unknown => {
  try {
    return JSON.parse(value);
  } catch (e) {
    throw new InvalidArgumentError(`not valid JSON (${(e as Error).message})`);
  }
};
const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};
const executionId = (value: string): string => {
  if (!isUuid(value)) throw new InvalidArgumentError(`execution id must be a uuid, got "${value}"`);
  return value;
};

program
  .command('submit')
  .description('request an execution of an action')
  .argument('<action>', 'action name, e.g. core.noop')
  .option('--input <json>', 'action input as JSON', jsonInput)
  .option('--key <key>', 'idempotency key: the same key and request return the first execution')
  .option('--max-attempts <n>', 'attempts before the execution is abandoned', positiveInt)
  .option('--priority <n>', 'higher is scheduled first', (v) => {
    const n = Number(v);
    if (!Number.isInteger(n)) throw new InvalidArgumentError('must be an integer');
    return n;
  })
  .option('--wait', 'wait until the execution reaches a final state and print its result (exit 1 unless Completed)')
  .option('--timeout <ms>', 'with --wait: give up after this long (exit 2)', positiveInt)
  .option('--json', 'print JSON')
  .action(async (action: string, o: { input?: unknown; key?: string; maxAttempts?: number; priority?: number; wait?: boolean; timeout?: number; json?: boolean }) => {
    await withContext(async ({ runtime, store }) => {
      const r = await runtime.submit({ action, input: o.input, idempotencyKey: o.key, maxAttempts: o.maxAttempts, priority: o.priority });
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
        console.log(toJson(steps.map((s) => ({ ...s.event, stateAfter: s.stateAfter, ownerAfter: s.ownerAfter }))));
        return;
      }
      console.log(
        table(
          ['REV', 'TYPE', 'BY', 'STATE AFTER', 'RECORDED AT'],
          steps.map((s) => [String(s.event.revision), s.event.type, String(s.event.metadata.by), s.stateAfter, s.event.recordedAt.toISOString()]),
        ),
      );
    });
  });

const bench = program.command('bench').description('benchmarks (run on a scratch database, dropped afterwards)');
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
