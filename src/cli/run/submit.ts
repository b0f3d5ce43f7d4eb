// What `baton submit` does (its options are defined in main.ts): the submission check every
// front door uses (src/runtime/submission.ts), then one ExecutionRequested; with --wait, the end.
// Its own module: the action registry (the built-ins, http.request with undici) is loaded only
// by the command that needs it, not by `baton status`.
import { statusOf } from '../../../actors/execution.machine.ts';
import { createActionRegistry } from '../../actions/index.ts';
import { loadConfig } from '../../config.ts';
import { checkSubmission, type SubmissionNames } from '../../runtime/submission.ts';
import type { JsonOptionValue } from '../arguments.ts';
import { withContext } from '../context.ts';
import { toJson } from '../format.ts';
import { loadActions } from '../hosts.ts';
import { waitForFinal } from '../wait.ts';

/** How `baton submit` names what it takes, in the messages of the submission check. */
const SUBMIT_NAMES: SubmissionNames = { action: 'action', input: '--input', idempotencyKey: '--key', maxAttempts: '--max-attempts', priority: '--priority', tags: '--tag', actionVersion: '--action-version' };

export async function submitCommand(
  action: string,
  o: { input?: JsonOptionValue; actions?: string; key?: string; maxAttempts?: number; priority?: number; tag?: Record<string, string>; actionVersion?: number; wait?: boolean; timeout?: number; json?: boolean },
): Promise<void> {
  // Checked before the database is opened: a bad submission writes nothing and needs nothing.
  const request = checkSubmission(
    createActionRegistry(await loadActions(o.actions, loadConfig())),
    { action, input: o.input ? o.input.json : null, ...(o.key !== undefined && { idempotencyKey: o.key }), ...(o.maxAttempts !== undefined && { maxAttempts: o.maxAttempts }), ...(o.priority !== undefined && { priority: o.priority }), ...(o.tag !== undefined && { tags: o.tag }), ...(o.actionVersion !== undefined && { actionVersion: o.actionVersion }) },
    SUBMIT_NAMES,
  );
  await withContext(async ({ runtime, store }) => {
    const r = await runtime.submit(request);
    if (!o.wait) {
      if (o.json) console.log(toJson({ executionId: r.executionId, created: r.created, status: statusOf(r.snapshot), revision: r.revision, tags: r.snapshot.context.tags ?? {}, ...(request.actionVersion !== undefined && { actionVersion: request.actionVersion }) }));
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
}
