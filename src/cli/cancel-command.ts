// `baton cancel <id>`: cancel an execution in whatever state it is in (src/runtime/cancel.ts),
// and say what happened: cancelled now, asked its worker to stop, already asked, or too late.
// An id that names no execution but a workflow cancels the workflow (`baton workflow cancel`).
import { InvalidArgumentError, type Command } from 'commander';
import { executionId, textOption, workflowId } from './arguments.ts';
import { durationMsArg } from './options.ts';

const DEFAULT_REASON = 'cancelled from the command line';
/** ExecutionCancelRequested's limit (schemas/events.ts), as the API's cancel takes it. */
const MAX_REASON_LENGTH = 1_000;


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

export function registerCancelCommand(program: Command): void {
  program
    .command('cancel')
    .description('cancel an execution (at once before a worker holds it, else by asking that worker to stop) or a workflow; exit 1 when too late')
    .argument('<id>', 'execution id, or workflow id', executionOrWorkflowId)
    .option('--reason <text>', 'why (recorded in the history)', textOption('--reason', MAX_REASON_LENGTH), DEFAULT_REASON)
    .option('--wait', 'wait until it reaches a final state and print it (exit 1 unless Cancelled)')
    .option('--timeout <ms>', 'with --wait: give up after this long (exit 2; at most 7 days)', durationMsArg)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/cancel.ts')).cancelCommand(id, o));
}
