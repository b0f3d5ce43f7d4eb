// What `baton submit | status | events` do (their options are defined in main.ts): one
// execution's state and history, from its stream.
import { statusOf } from '../../../actors/execution.machine.ts';
import { workflowStreamId } from '../../../schemas/workflow-events.ts';
import { BatonError, NotFoundError } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { createActionRegistry } from '../../actions/index.ts';
import { loadConfig, workerStaleAfterMs } from '../../config.ts';
import { createLivenessStore } from '../../liveness/liveness-store.ts';
import { waitingReasonNow } from '../../liveness/waiting-reason.ts';
import { checkSubmission, type SubmissionNames } from '../../runtime/submission.ts';
import type { JsonOptionValue } from '../arguments.ts';
import { withContext } from '../context.ts';
import { loadActions } from '../hosts.ts';
import { fields, table, toJson } from '../format.ts';
import { waitForFinal } from '../wait.ts';

/** How `baton submit` names what it takes, in the messages of the submission check. */
const SUBMIT_NAMES: SubmissionNames = { action: 'action', input: '--input', idempotencyKey: '--key', maxAttempts: '--max-attempts', priority: '--priority' };

export async function submitCommand(
  action: string,
  o: { input?: JsonOptionValue; actions?: string; key?: string; maxAttempts?: number; priority?: number; wait?: boolean; timeout?: number; json?: boolean },
): Promise<void> {
  // Checked before the database is opened: a bad submission writes nothing and needs nothing.
  const request = checkSubmission(
    createActionRegistry(await loadActions(o.actions, loadConfig())),
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
}

/**
 * A NotFoundError for an id that names a workflow, not an execution (workflow ids are uuids by
 * default, so the argument parser cannot tell): says which command shows it.
 */
async function notAnExecution(store: EventStore, err: unknown, id: string): Promise<never> {
  if (err instanceof NotFoundError && (await store.readStream(workflowStreamId(id), { limit: 1 })).length > 0) {
    throw new BatonError(`${id} is a workflow, not an execution: run \`baton workflow status ${id}\``);
  }
  throw err;
}

export async function statusCommand(id: string, o: { json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store, pool, config }) => {
    const { snapshot, revision } = await runtime.load(id).catch((err: unknown) => notAnExecution(store, err, id));
    const c = snapshot.context;
    const waiting = await waitingReasonNow(createLivenessStore(pool), { status: statusOf(snapshot), action: c.action, retryAt: c.retryAt }, workerStaleAfterMs(config.timeouts));
    if (o.json) {
      console.log(toJson({ executionId: id, status: statusOf(snapshot), revision, waiting, context: c }));
      return;
    }
    console.log(
      fields([
        ['execution', id],
        ['status', statusOf(snapshot)],
        ['waiting', waiting],
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
}

export async function eventsCommand(id: string, o: { json?: boolean }): Promise<void> {
  await withContext(async ({ runtime, store }) => {
    const steps = await runtime.history(id).catch((err: unknown) => notAnExecution(store, err, id));
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
}
