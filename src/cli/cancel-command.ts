// `baton cancel <id>`: cancel an execution in whatever state it is in (src/runtime/cancel.ts),
// and say what happened: cancelled now, asked its worker to stop, already asked, or too late.
// An id that names no execution but a workflow cancels the workflow (`baton workflow cancel`).
import { InvalidArgumentError, type Command } from 'commander';
import { statusOf } from '../../actors/execution.machine.ts';
import { NotFoundError } from '../errors.ts';
import { cancelExecution, type CancelResult } from '../runtime/cancel.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { cancelWorkflow, waitForWorkflowEnd, type CancelWorkflowResult, type WorkflowServiceDeps } from '../workflow/service.ts';
import { executionId, textOption, workflowId } from './arguments.ts';
import { withContext } from './context.ts';
import { toJson } from './format.ts';
import { waitForFinal } from './wait.ts';

const DEFAULT_REASON = 'cancelled from the command line';
/** ExecutionCancelRequested's limit (schemas/events.ts), as the API's cancel takes it. */
const MAX_REASON_LENGTH = 1_000;

const positiveMs = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer (milliseconds)');
  return n;
};

/** An execution id (a uuid) or a workflow id. */
function executionOrWorkflowId(value: string): string {
  try {
    return executionId(value);
  } catch {
    try {
      return workflowId(value);
    } catch {
      throw new InvalidArgumentError(`must be an execution id (a uuid) or a workflow id, got "${value}"`);
    }
  }
}

/** The execution with this id, else the workflow; NotFoundError naming both when neither exists. */
async function cancelEither(deps: WorkflowServiceDeps & { runtime: ExecutionRuntime }, id: string, reason: string): Promise<CancelResult | CancelWorkflowResult> {
  try {
    return await cancelExecution(deps.runtime, id, reason);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
  try {
    return await cancelWorkflow(deps, id, reason);
  } catch (err) {
    if (err instanceof NotFoundError) throw new NotFoundError('execution or workflow', id);
    throw err;
  }
}

export function registerCancelCommand(program: Command): void {
  program
    .command('cancel')
    .description('cancel an execution (at once before a worker holds it, else by asking that worker to stop) or a workflow; exit 1 when too late')
    .argument('<id>', 'execution id, or workflow id', executionOrWorkflowId)
    .option('--reason <text>', 'why (recorded in the history)', textOption('--reason', MAX_REASON_LENGTH), DEFAULT_REASON)
    .option('--wait', 'wait until it reaches a final state and print it (exit 1 unless Cancelled)')
    .option('--timeout <ms>', 'with --wait: give up after this long (exit 2)', positiveMs)
    .option('--json', 'print JSON')
    .action(async (id: string, o: { reason: string; wait?: boolean; timeout?: number; json?: boolean }) => {
      await withContext(async ({ runtime, store }) => {
        const r = await cancelEither({ runtime, store }, id, o.reason);
        if (r.outcome === 'too-late') {
          if (o.json) console.log(toJson(r));
          else process.stderr.write(`baton: ${r.message}\n`);
          process.exitCode = 1;
          return;
        }
        if (!o.wait) {
          console.log(o.json ? toJson(r) : r.message);
          return;
        }
        if (!o.json) process.stderr.write(`${r.message}\nwaiting for it to end …\n`);
        const ended = 'executionId' in r ? await executionEnd(runtime, store, id, o.timeout) : await workflowEnd(store, id, o.timeout);
        if (!ended) {
          process.stderr.write(`baton: ${id} did not end within ${o.timeout} ms\n`);
          process.exitCode = 2;
          return;
        }
        if (o.json) console.log(toJson({ ...r, ...ended }));
        else console.log(`${ended.status}${ended.status === 'Cancelled' ? ` (recorded by ${ended.endedBy})` : ' (it finished before the cancel reached it)'}`);
        if (ended.status !== 'Cancelled') process.exitCode = 1;
      });
    });
}

interface Ended {
  status: string;
  endedBy: string;
}

async function executionEnd(runtime: ExecutionRuntime, store: EventStore, id: string, timeoutMs?: number): Promise<Ended | undefined> {
  const done = await waitForFinal(store, runtime, id, timeoutMs);
  return done && { status: statusOf(done.snapshot), endedBy: String(done.events.at(-1)?.metadata.by) };
}

async function workflowEnd(store: EventStore, id: string, timeoutMs?: number): Promise<Ended | undefined> {
  const done = await waitForWorkflowEnd(store, id, timeoutMs);
  return done && { status: String(done.snapshot.value), endedBy: String(done.events.at(-1)?.metadata.by) };
}
