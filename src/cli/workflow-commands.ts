// `baton workflow submit | status | cancel`: workflows from a JSON or YAML file. A definition
// with problems is refused before anything is written, one problem per line with its field
// path; the executors' orchestrators run the rest (src/workflow/orchestrator.ts).
import type { Command } from 'commander';
import { textOption, workflowId } from './arguments.ts';
import { durationMsArg, namespaceName } from './options.ts';

const DEFAULT_REASON = 'cancelled from the command line';
/** ExecutionCancelRequested's limit (schemas/events.ts), as the API's cancel takes it. */
const MAX_REASON_LENGTH = 1_000;

export function registerWorkflowCommands(program: Command): void {
  const workflow = program.command('workflow').description('workflows: DAGs of steps, each step an execution that starts once its parents completed');

  workflow
    .command('submit')
    .description('submit a workflow from a JSON or YAML file; every problem is listed (with its field path) and nothing is written if there is one')
    .argument('<file>', 'the definition: .json, or YAML (.yaml, .yml)')
    .option('--id <id>', 'the workflow id (default: a new UUID); submitting the same definition under the same id again returns the first workflow', workflowId)
    .option('--actions <module>', 'a module exporting more actions, so steps may use them (the built-ins are always known)')
    .option('--namespace <name>', "where the workflow and its steps' executions live (default: $BATON_NAMESPACE, or default)", namespaceName)
    .option('--wait', 'wait until the workflow ends and print its steps (exit 1 unless Completed)')
    .option('--timeout <ms>', 'with --wait: give up after this long (exit 2; at most 7 days)', durationMsArg)
    .option('--json', 'print JSON')
    .action(async (file: string, o) => (await import('./run/workflow.ts')).workflowSubmitCommand(file, o));

  workflow
    .command('status')
    .description("a workflow's state and each step's: status, attempts and execution id")
    .argument('<id>', 'workflow id', workflowId)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/workflow.ts')).workflowStatusCommand(id, o));

  workflow
    .command('cancel')
    .description('cancel a workflow: no more steps start and the running ones are cancelled (exit 1 when it already ended)')
    .argument('<id>', 'workflow id', workflowId)
    .option('--reason <text>', 'why (recorded in its history)', textOption('--reason', MAX_REASON_LENGTH), DEFAULT_REASON)
    .option('--json', 'print JSON')
    .action(async (id: string, o) => (await import('./run/workflow.ts')).workflowCancelCommand(id, o));
}
