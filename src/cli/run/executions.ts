// What `baton status | events` do (their options are defined in main.ts): one execution's state
// and history, from its stream.
import type pg from 'pg';
import { executionMachine, statusOf, type ExecutionSnapshot } from '../../../actors/execution.machine.ts';
import { NotFoundError } from '../../errors.ts';
import type { EventStore } from '../../eventstore/event-store.ts';
import { timeline, type TimelineStep } from '../../replay/inspect.ts';
import { readStoredOrArchivedHistory } from '../../retention/archived-history.ts';
import { loadConfig, workerStaleAfterMs } from '../../config.ts';
import { createLivenessStore } from '../../liveness/liveness-store.ts';
import { waitingReasonNow } from '../../liveness/waiting-reason.ts';
import { advertisedRateLimits, namespaceRateLimitReason, rateLimitReason } from '../../liveness/rate-limit-wait.ts';
import { namespaceOr } from '../../input/namespace.ts';
import { RateBuckets } from '../../runtime/rate-buckets.ts';
import { readContext } from '../context.ts';
import { fields, table, toJson } from '../format.ts';
import { eventSummary } from '../../replay/event-summary.ts';
import { versionShown } from '../../input/action-versions.ts';
import { notAnExecution } from './archived-notice.ts';


/** The execution's history from the store or, archived, from its archive file (said on stderr), as the state after every event. */
async function stepsOf(store: EventStore, pool: pg.Pool, id: string): Promise<TimelineStep[]> {
  const { events, archived } = await readStoredOrArchivedHistory(store, pool, id).catch((err: unknown) => notAnExecution(store, pool, err, id));
  if (archived) process.stderr.write(`(archived at ${archived.archivedAt.toISOString()}: read from ${archived.archive})\n`);
  return timeline(id, events);
}

export async function statusCommand(id: string, o: { json?: boolean }): Promise<void> {
  await readContext(async ({ runtime, store, pool, config }) => {
    // An execution retention archived is final: its last state, from its archive file.
    const loaded = await runtime.load(id).catch(async (err: unknown) => {
      if (!(err instanceof NotFoundError)) throw err;
      const last = (await stepsOf(store, pool, id)).at(-1)!;
      return { snapshot: executionMachine.resolveState({ value: last.state, context: last.context }) as ExecutionSnapshot, revision: BigInt(last.revision) };
    });
    const { snapshot, revision } = loaded;
    const c = snapshot.context;
    const waiting =
      (await waitingReasonNow(createLivenessStore(pool), { status: statusOf(snapshot), action: c.action, namespace: c.namespace, pinnedVersion: c.pinnedVersion, retryAt: c.retryAt }, workerStaleAfterMs(config.timeouts))) ??
      (statusOf(snapshot) === 'Requested'
        ? ((await namespaceRateLimitReason(new RateBuckets(store), namespaceOr(c.namespace), config.namespaceRateLimits, Date.now())) ??
          (await rateLimitReason(new RateBuckets(store), { action: c.action, input: () => c.input }, (await advertisedRateLimits(pool, [c.action])).get(c.action), Date.now())))
        : null);
    if (o.json) {
      console.log(toJson({ executionId: id, status: statusOf(snapshot), revision, actionVersion: versionShown(c), waiting, tags: c.tags ?? {}, context: c }));
      return;
    }
    console.log(
      fields([
        ['execution', id],
        ['status', statusOf(snapshot)],
        ['waiting', waiting],
        ['action', c.action],
        ['action version', versionShown(c)?.toString() ?? undefined],
        ['owner', c.owner],
        ['worker', c.workerId],
        ['attempt', `${c.attempt} of ${c.maxAttempts}`],
        ['revision', String(revision)],
        ['requested', c.requestedAt],
        ['started', c.startedAt],
        ['finished', c.finishedAt],
        // Which limit the deadline is: the handoff's schedule-to-start, or the run's start-to-close.
        [statusOf(snapshot) === 'Scheduled' ? 'start by' : statusOf(snapshot) === 'Running' ? 'finish by' : 'deadline', c.deadline],
        ['cancel requested', c.cancelRequested],
        // Why it ended, where the end has a reason of its own (an error is shown below).
        ['cancelled', c.cancelReason],
        ['timed out', c.timedOutLimit === undefined ? undefined : `${c.timedOutLimit} limit`],
        ['abandoned', c.abandonReason],
        ['result', c.result === undefined ? undefined : JSON.stringify(c.result)],
        // The error stays after a retry (GraphQL's Execution.error alike): beside a later attempt's
        // result it is an earlier attempt's failure, and says so.
        [statusOf(snapshot) === 'Failed' ? 'error' : 'last failure', c.error ? c.error.message : undefined],
        ['tags', c.tags ? Object.entries(c.tags).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${v}`).join(' ') : undefined],
      ]),
    );
  });
}

export async function eventsCommand(id: string, o: { json?: boolean }): Promise<void> {
  await readContext(async ({ store, pool }) => {
    const steps = await stepsOf(store, pool, id);
    if (o.json) {
      console.log(toJson(steps.map(({ context: _context, next: _next, ...s }) => s)));
      return;
    }
    console.log(
      table(
        ['REV', 'TYPE', 'BY', 'STATE AFTER', 'RECORDED AT', 'WHY'],
        steps.map((s) => [String(s.revision), s.type, s.by, s.state, s.recordedAt, eventSummary(s.type, s.data)]),
      ),
    );
  });
}
