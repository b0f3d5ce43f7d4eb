// What `baton cancel <id>` does (its options are defined in cancel-command.ts): cancel the
// execution with this id (src/runtime/cancel.ts), else the workflow, and say what happened.
import { statusOf } from '../../../actors/execution.machine.ts';
import { NotFoundError } from '../../errors.ts';
import { cancelExecution, type CancelResult } from '../../runtime/cancel.ts';
import type { ExecutionRuntime } from '../../runtime/execution-runtime.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { cancelWorkflow, waitForWorkflowEnd, type CancelWorkflowResult, type WorkflowServiceDeps } from '../../workflow/service.ts';
import { withContext } from '../context.ts';
import { toJson } from '../format.ts';
import { waitForFinal } from '../wait.ts';

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

export async function cancelCommand(id: string, o: { reason: string; wait?: boolean; timeout?: number; json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store }) => {
    const r = await cancelEither({ runtime, store }, id, o.reason);
    if (r.outcome === 'too-late') {
      // Already Cancelled is what was asked for (a second caller, a retried script): exit 0.
      const cancelled = r.status === 'Cancelled';
      if (o.json) console.log(toJson(r));
      else if (cancelled) console.log(r.message);
      else process.stderr.write(`baton: ${r.message}\n`);
      if (!cancelled) process.exitCode = 1;
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
}

interface Ended {
  status: string;
  endedBy: string;
}

async function executionEnd(runtime: ExecutionRuntime, store: EventStore, id: string, timeoutMs?: number): Promise<Ended | undefined> {
  const done = await waitForFinal(store, runtime, id, timeoutMs);
  return done && { status: statusOf(done.snapshot), endedBy: String(done.events?.at(-1)?.metadata.by) };
}

async function workflowEnd(store: EventStore, id: string, timeoutMs?: number): Promise<Ended | undefined> {
  const done = await waitForWorkflowEnd(store, id, timeoutMs);
  return done && { status: String(done.snapshot.value), endedBy: String(done.events.at(-1)?.metadata.by) };
}
