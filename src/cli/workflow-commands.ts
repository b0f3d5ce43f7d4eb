// `baton workflow submit | status | cancel`: workflows from a JSON or YAML file. A definition
// with problems is refused before anything is written, one problem per line with its field
// path; the executors' orchestrators run the rest (src/workflow/orchestrator.ts).
import { Command, InvalidArgumentError } from 'commander';
import { createActionRegistry } from '../actions/index.ts';
import { readDefinitionFile } from '../workflow/definition-file.ts';
import { InvalidWorkflowError, cancelWorkflow, submitWorkflow, waitForWorkflowEnd, workflowStatus, type WorkflowStatusView } from '../workflow/service.ts';
import { textOption, workflowId } from './arguments.ts';
import { withContext, type CliContext } from './context.ts';
import { fields, table, toJson } from './format.ts';
import { loadActions } from './hosts.ts';

const DEFAULT_REASON = 'cancelled from the command line';
/** ExecutionCancelRequested's limit (schemas/events.ts), as the API's cancel takes it. */
const MAX_REASON_LENGTH = 1_000;

const positiveInt = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};

function printStatus(w: WorkflowStatusView): void {
  console.log(
    fields([
      ['workflow', w.workflowId],
      ['name', w.name],
      ['status', w.status],
      ['on failure', w.onFailure],
      ['started', w.startedAt],
      ['finished', w.finishedAt],
      ['cancel', w.cancelReason],
      ['reason', w.reason],
    ]),
  );
  console.log('');
  console.log(
    table(
      ['STEP', 'ACTION', 'STATUS', 'ATTEMPTS', 'EXECUTION'],
      w.steps.map((s) => [
        s.id,
        s.action,
        // A step's status comes from the workflow's events; while it runs, its execution's state says more.
        s.status === 'Scheduled' && s.execution ? s.execution.status : s.status,
        s.execution ? `${s.execution.attempt}/${s.execution.maxAttempts}` : '-',
        s.executionId ?? '-',
      ]),
    ),
  );
  const errors = w.steps.filter((s) => s.error);
  if (errors.length > 0) console.log(`\n${errors.map((s) => `${s.id}: ${s.error!.message}`).join('\n')}`);
}

const viewJson = (w: WorkflowStatusView) => toJson({ ...w, definition: undefined });

interface SubmitOptions {
  id?: string;
  actions?: string;
  wait?: boolean;
  timeout?: number;
  json?: boolean;
}

async function submitCommand(file: string, o: SubmitOptions): Promise<void> {
  const definition = await readDefinitionFile(file); // DefinitionFileError names line and column
  const actions = createActionRegistry(await loadActions(o.actions));
  await withContext(async (ctx: CliContext) => {
    let r;
    try {
      r = await submitWorkflow({ ...ctx, actions }, definition, { ...(o.id !== undefined && { id: o.id }) });
    } catch (err) {
      if (!(err instanceof InvalidWorkflowError)) throw err;
      if (o.json) console.log(toJson({ file, problems: err.problems }));
      process.stderr.write(`baton: ${file} is not a valid workflow (${err.problems.length} problem${err.problems.length === 1 ? '' : 's'}; nothing was submitted):\n`);
      for (const p of err.problems) process.stderr.write(`  ${p.path || '(root)'}: ${p.message}\n`);
      process.exitCode = 1;
      return;
    }
    if (!o.wait) {
      if (o.json) console.log(toJson(r));
      else console.log(`${r.created ? 'submitted workflow' : 'already submitted (same id):'} ${r.workflowId} (${r.steps} step${r.steps === 1 ? '' : 's'}, ${r.status})`);
      return;
    }
    if (!o.json) process.stderr.write(`submitted workflow ${r.workflowId}; waiting for it to end …\n`);
    const done = await waitForWorkflowEnd(ctx.store, r.workflowId, o.timeout);
    if (!done) {
      process.stderr.write(`baton: workflow ${r.workflowId} did not end within ${o.timeout} ms (it goes on; see \`baton workflow status ${r.workflowId}\`)\n`);
      process.exitCode = 2;
      return;
    }
    const status = await workflowStatus(ctx, r.workflowId);
    if (o.json) console.log(viewJson(status));
    else printStatus(status);
    if (status.status !== 'Completed') process.exitCode = 1;
  });
}

export function registerWorkflowCommands(program: Command): void {
  const workflow = program.command('workflow').description('workflows: DAGs of steps, each step an execution that starts once its parents completed');

  workflow
    .command('submit')
    .description('submit a workflow from a JSON or YAML file; every problem is listed (with its field path) and nothing is written if there is one')
    .argument('<file>', 'the definition: .json, or YAML (.yaml, .yml)')
    .option('--id <id>', 'the workflow id (default: a new UUID); submitting the same definition under the same id again returns the first workflow', workflowId)
    .option('--actions <module>', 'a module exporting more actions, so steps may use them (the built-ins are always known)')
    .option('--wait', 'wait until the workflow ends and print its steps (exit 1 unless Completed)')
    .option('--timeout <ms>', 'with --wait: give up after this long (exit 2)', positiveInt)
    .option('--json', 'print JSON')
    .action(submitCommand);

  workflow
    .command('status')
    .description("a workflow's state and each step's: status, attempts and execution id")
    .argument('<id>', 'workflow id', workflowId)
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      await withContext(async (ctx) => {
        const status = await workflowStatus(ctx, id);
        if (o.json) console.log(viewJson(status));
        else printStatus(status);
      });
    });

  workflow
    .command('cancel')
    .description('cancel a workflow: no more steps start and the running ones are cancelled (exit 1 when it already ended)')
    .argument('<id>', 'workflow id', workflowId)
    .option('--reason <text>', 'why (recorded in its history)', textOption('--reason', MAX_REASON_LENGTH), DEFAULT_REASON)
    .option('--json', 'print JSON')
    .action(async (id: string, o: { reason: string; json?: boolean }) => {
      await withContext(async (ctx) => {
        const r = await cancelWorkflow(ctx, id, o.reason);
        if (o.json) console.log(toJson(r));
        else if (r.outcome === 'too-late') process.stderr.write(`baton: ${r.message}\n`);
        else console.log(r.message);
        if (r.outcome === 'too-late') process.exitCode = 1;
      });
    });
}
