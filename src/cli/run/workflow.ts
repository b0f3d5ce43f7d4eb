// What `baton workflow submit | status | cancel` do (their options are defined in
// workflow-commands.ts).
import { createActionRegistry } from '../../actions/index.ts';
import { readDefinitionFile } from '../../workflow/definition-file.ts';
import { InvalidWorkflowError, cancelWorkflow, submitWorkflow, waitForWorkflowEnd, workflowStatus, type WorkflowStatusView } from '../../workflow/service.ts';
import type pg from 'pg';
import { BatonError, NotFoundError } from '../../errors.ts';
import { archivedNotice } from './archived-notice.ts';
import { type CliContext, readContext, withContext } from '../context.ts';
import { fields, table, toJson } from '../format.ts';
import { loadActions } from '../hosts.ts';

function printStatus(w: WorkflowStatusView): void {
  console.log(
    fields([
      ['workflow', w.workflowId],
      ['name', w.name],
      ['namespace', w.namespace],
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

const viewJson = (w: WorkflowStatusView, extra: { created?: boolean } = {}) => toJson({ ...extra, ...w, definition: undefined });

export interface SubmitOptions {
  id?: string;
  actions?: string;
  namespace?: string;
  wait?: boolean;
  timeout?: number;
  json?: boolean;
}

export async function workflowSubmitCommand(file: string, o: SubmitOptions): Promise<void> {
  const definition = await readDefinitionFile(file); // DefinitionFileError names line and column
  await withContext(async (ctx: CliContext) => {
    const actions = createActionRegistry(await loadActions(o.actions, ctx.config));
    let r;
    try {
      r = await submitWorkflow({ ...ctx, actions }, definition, { ...(o.id !== undefined && { id: o.id }), namespace: o.namespace ?? ctx.config.namespace });
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
    // `created` as without --wait: whether this call started it or found it under its id.
    if (o.json) console.log(viewJson(status, { created: r.created }));
    else printStatus(status);
    if (status.status !== 'Completed') process.exitCode = 1;
  });
}

/** A workflow retention archived is not "not found": say when and where it went. */
async function notFoundUnlessArchived(pool: pg.Pool, err: unknown, id: string): Promise<never> {
  if (!(err instanceof NotFoundError)) throw err;
  const archived = await archivedNotice(pool, 'workflow', id);
  if (!archived) throw err;
  throw new BatonError(`${archived}, which lists its steps' executions): \`baton inspect <execution id>\` reads each step from its own archive file`);
}

export async function workflowStatusCommand(id: string, o: { json?: boolean }): Promise<void> {
  await readContext(async (ctx) => {
    const status = await workflowStatus(ctx, id).catch((err: unknown) => notFoundUnlessArchived(ctx.pool, err, id));
    if (o.json) console.log(viewJson(status));
    else printStatus(status);
  });
}

export async function workflowCancelCommand(id: string, o: { reason: string; json?: boolean }): Promise<void> {
  await withContext(async (ctx) => {
    const r = await cancelWorkflow(ctx, id, o.reason).catch((err: unknown) => notFoundUnlessArchived(ctx.pool, err, id));
    if (o.json) console.log(toJson(r));
    else if (r.outcome === 'too-late') process.stderr.write(`baton: ${r.message}\n`);
    else console.log(r.message);
    if (r.outcome === 'too-late') process.exitCode = 1;
  });
}
