// The workflow orchestrator: runs inside every executor process, follows the event store
// (`workflow-` and `execution-` streams: catch up, then subscribe, resuming after database
// errors), keeps each running workflow's folded snapshot, and does what workflowPlan says:
//
//   schedule a ready step   submit its execution with idempotency key `workflow:<id>:<step>`
//                           (so its id is derived from the key), THEN record
//                           WorkflowStepScheduled. A crash in between leaves an execution in
//                           Requested; the successor plans the same step, its submit finds that
//                           execution (same key, same request), and records it: never a second one.
//   a step's execution ends record WorkflowStepFinished {outcome, result | error}.
//   cancel                  cancelExecution on each step execution still running.
//   end                     record WorkflowCompleted / WorkflowFailed / WorkflowCancelled.
//
// Several executors run one each. Every workflow append is a compare-and-swap on the workflow's
// revision with an id derived from its meaning (workflow-stream.ts), so the loser of a race
// reloads the stream and plans again, and an event appended twice is stored once. The
// orchestrator never appends to an execution stream itself: only runtime.submit (a new stream)
// and cancelExecution (which leaves a worker-held execution to its owner) touch them.
//
// A step's parentId is the execution id of its FIRST parent (dependsOn[0]); roots have none.
// An execution has one parentId, and the first parent is the one the definition names first,
// which is stable across executors and replays; the full fan-in is in the definition.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { isFinal, statusOf } from '../../actors/execution.machine.ts';
import { decideWorkflow, startWorkflow, workflowPlan, type WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import { EXECUTION_STREAM_PREFIX, executionIdOfStream, type ErrorInfo } from '../../schemas/events.ts';
import { WORKFLOW_STREAM_PREFIX, workflowStreamId, type StepOutcome, type WorkflowEvent } from '../../schemas/workflow-events.ts';
import { stepInput, type WorkflowStep } from '../../schemas/workflow.ts';
import { DuplicateEventIdError, IdempotencyKeyConflictError, NotFoundError, WrongExpectedRevisionError } from '../errors.ts';
import { START, type EventStore, type StoredEvent } from '../eventstore/event-store.ts';
import type { ExecutionRuntime, LoadedExecution } from '../runtime/execution-runtime.ts';
import { cancelExecution } from '../runtime/cancel.ts';
import { followStore } from '../eventstore/follow.ts';
import { asWorkflowEvent, decideAll, loadWorkflow, workflowEvent, workflowEventId } from './workflow-stream.ts';

export interface OrchestratorOptions {
  store: EventStore;
  runtime: ExecutionRuntime;
  log: Logger;
  registry?: Registry;
  clock?: () => Date;
  /** Step executions one workflow submits at once. Default 16. */
  parallelism?: number;
  /**
   * Every running workflow is looked at again this often even without an event (a safety net;
   * normal progress is event-driven). 0 turns it off. Default 10 s.
   */
  sweepEveryMs?: number;
}

export interface Orchestrator {
  /** Resolves once it has caught up with the event store and is acting. */
  ready: Promise<void>;
  stop(): Promise<void>;
  /** Workflows it follows that have not ended. */
  active(): number;
}

/** The idempotency key of a step's execution: its id is derived from it. */
export const stepExecutionKey = (workflowId: string, stepId: string) => `workflow:${workflowId}:${stepId}`;

/** The step of a `workflow:<id>:<step>` key (step ids have no ':'), or undefined. */
function stepOfKey(key: unknown, workflowId: string): string | undefined {
  const prefix = `workflow:${workflowId}:`;
  return typeof key === 'string' && key.startsWith(prefix) ? key.slice(prefix.length) : undefined;
}

interface Outcome {
  outcome: StepOutcome;
  result?: unknown;
  error?: ErrorInfo;
}

interface ExecutionInfo {
  workflowId: string;
  stepId: string;
  /** How it ended; 'check' when an event suggests it may have (load it to know); undefined while it runs. */
  final?: Outcome | 'check';
}

interface Tracked {
  id: string;
  snapshot: WorkflowSnapshot;
  revision: bigint;
  /** Reload the stream before planning (a conflict, a gap, a refused event). */
  stale: boolean;
  /** Every execution of this workflow seen, recorded or not: execution id → step id. */
  executions: Map<string, string>;
  /** Error messages of finished steps, for WorkflowFailed's reason. */
  errors: Map<string, string>;
  /** Executions this process already asked to cancel. */
  cancelAsked: Set<string>;
  running?: Promise<void>;
  again: boolean;
  failures: number;
  retryTimer?: NodeJS.Timeout;
}

/** Event types after which an execution may be final (ExecutionFailed only when not retried). */
const MAYBE_FINAL = new Set(['ExecutionFailed', 'ExecutionCancelled', 'ExecutionTimedOut', 'ExecutionAbandoned']);

function outcomeOf(loaded: LoadedExecution): Outcome | undefined {
  const { snapshot } = loaded;
  if (!isFinal(snapshot)) return undefined;
  const c = snapshot.context;
  const status = statusOf(snapshot) as StepOutcome;
  const errorOf = (message: string | undefined, type?: string): ErrorInfo => ({ message: message ?? status, ...(type && { type }) });
  switch (status) {
    case 'Completed':
      return { outcome: status, result: c.result ?? null };
    case 'Failed':
      return { outcome: status, error: errorOf(c.error?.message, c.error?.type) };
    case 'Cancelled':
      return { outcome: status, error: errorOf(c.cancelReason) };
    case 'TimedOut':
      return { outcome: status, error: errorOf(`timed out (${c.timedOutLimit ?? 'limit'})`) };
    default:
      return { outcome: status, error: errorOf(c.abandonReason) };
  }
}

export function startOrchestrator(o: OrchestratorOptions): Orchestrator {
  const log = o.log;
  const clock = o.clock ?? (() => new Date());
  const parallelism = o.parallelism ?? 16;
  const workflows = new Map<string, Tracked>();
  const executions = new Map<string, ExecutionInfo>();
  const ac = new AbortController();
  let caughtUp = false;

  const metrics = o.registry && {
    scheduled: new Counter({ name: 'baton_workflow_steps_scheduled_total', help: 'Workflow steps this executor recorded as scheduled', registers: [o.registry] }),
    ended: new Counter({ name: 'baton_workflows_ended_total', help: 'Workflows this executor ended', labelNames: ['status'], registers: [o.registry] }),
    conflicts: new Counter({ name: 'baton_workflow_conflicts_total', help: 'Workflow appends that lost a race to another executor (then re-planned)', registers: [o.registry] }),
    active: new Gauge({ name: 'baton_workflows_active', help: 'Workflows being orchestrated (not ended)', registers: [o.registry], collect() { this.set(workflows.size); } }),
  };

  // --- what the events say -----------------------------------------------------------------

  function track(w: Tracked, executionId: string, stepId: string, final?: ExecutionInfo['final']): ExecutionInfo {
    let info = executions.get(executionId);
    if (!info) {
      info = { workflowId: w.id, stepId, ...(final && { final }) };
      executions.set(executionId, info);
    }
    w.executions.set(executionId, stepId);
    return info;
  }

  /** What a workflow event tells us besides the machine's state. */
  function note(w: Tracked, e: WorkflowEvent): void {
    if (e.type === 'WorkflowStepScheduled') track(w, e.data.executionId, e.data.stepId, 'check');
    if (e.type === 'WorkflowStepFinished' && e.data.error) w.errors.set(e.data.stepId, e.data.error.message);
  }

  function forget(w: Tracked): void {
    workflows.delete(w.id);
    for (const id of w.executions.keys()) executions.delete(id);
    clearTimeout(w.retryTimer);
  }

  function applyWorkflowEvent(e: StoredEvent): void {
    const id = e.streamId.slice(WORKFLOW_STREAM_PREFIX.length);
    let w = workflows.get(id);
    if (!w) {
      // Not followed: a new workflow, or one that ended (and was forgotten) or is not ours to read.
      if (e.revision !== 0n || e.type !== 'WorkflowStarted') return;
      let snapshot: WorkflowSnapshot;
      try {
        snapshot = startWorkflow(asWorkflowEvent(e));
      } catch (err) {
        log.error({ workflowId: id, err }, 'workflow stream does not start with a valid WorkflowStarted; not orchestrating it');
        return;
      }
      w = { id, snapshot, revision: 0n, stale: false, executions: new Map(), errors: new Map(), cancelAsked: new Set(), again: false, failures: 0 };
      workflows.set(id, w);
      if (caughtUp) {
        const d = snapshot.context.definition;
        log.info({ workflowId: id, name: d.name, steps: d.steps.length, onFailure: d.onFailure }, `workflow ${id} started`);
        kick(w);
      }
      return;
    }
    if (e.revision <= w.revision) return; // applied already (our own append, or a reload)
    const next = e.revision === w.revision + 1n ? decideStored(w, e) : undefined;
    if (next) w.snapshot = next;
    else w.stale = true; // a gap, or an event that does not fit what we followed: reload before acting
    if (!caughtUp) {
      if (w.snapshot.status === 'done' && !w.stale) forget(w);
      return;
    }
    kick(w);
  }

  /** The snapshot after a stored event, or undefined when it does not parse or fit. */
  function decideStored(w: Tracked, e: StoredEvent): WorkflowSnapshot | undefined {
    try {
      const event = asWorkflowEvent(e);
      const d = decideWorkflow(w.snapshot, event);
      if (!d.ok) throw new Error(d.reason);
      w.revision = e.revision;
      note(w, event);
      return d.snapshot;
    } catch (err) {
      log.warn({ workflowId: w.id, revision: Number(e.revision), err }, 'a stored workflow event does not fit the state followed; reloading the stream');
      return undefined;
    }
  }

  function applyExecutionEvent(e: StoredEvent): void {
    const executionId = executionIdOfStream(e.streamId);
    if (!executionId) return;
    if (e.type === 'ExecutionRequested') {
      const data = e.data as { workflowId?: string; idempotencyKey?: string };
      const w = data.workflowId === undefined ? undefined : workflows.get(data.workflowId);
      const stepId = w && stepOfKey(data.idempotencyKey, w.id);
      if (w && stepId) track(w, executionId, stepId);
      return;
    }
    const info = executions.get(executionId);
    if (!info) return;
    if (e.type === 'ExecutionCompleted') info.final = { outcome: 'Completed', result: (e.data as { result?: unknown }).result ?? null };
    else if (MAYBE_FINAL.has(e.type)) info.final = 'check';
    else return;
    const w = workflows.get(info.workflowId);
    if (w && caughtUp) kick(w);
  }

  /** Never throws: one odd event must not stop the orchestrator from following the store. */
  function apply(e: StoredEvent): void {
    try {
      if (e.streamId.startsWith(WORKFLOW_STREAM_PREFIX)) applyWorkflowEvent(e);
      else if (e.streamId.startsWith(EXECUTION_STREAM_PREFIX)) applyExecutionEvent(e);
    } catch (err) {
      log.error({ err, streamId: e.streamId, revision: Number(e.revision) }, 'orchestrator could not apply an event; skipping it');
    }
  }

  // --- acting on the plan ------------------------------------------------------------------

  /** One workflow at a time: a kick while it is being settled runs it once more afterwards. */
  function kick(w: Tracked): void {
    if (ac.signal.aborted || !workflows.has(w.id)) return;
    if (w.running) {
      w.again = true;
      return;
    }
    clearTimeout(w.retryTimer);
    w.running = (async () => {
      try {
        do {
          w.again = false;
          await settle(w);
        } while (w.again && !ac.signal.aborted);
        w.failures = 0;
      } catch (err) {
        w.failures++;
        w.stale = true;
        const retryInMs = Math.min(100 * 2 ** w.failures, 5_000);
        log.error({ workflowId: w.id, err, retryInMs }, 'orchestrating a workflow failed; will try again');
        w.retryTimer = setTimeout(() => kick(w), retryInMs);
        w.retryTimer.unref();
      } finally {
        w.running = undefined;
      }
    })();
  }

  /** Act until the plan asks for nothing more (bounded; a workflow has at most 1,000 steps). */
  async function settle(w: Tracked): Promise<void> {
    for (let round = 0; round < 5_000 && !ac.signal.aborted; round++) {
      if (!(await advance(w))) return;
    }
  }

  async function reload(w: Tracked): Promise<void> {
    const loaded = await loadWorkflow(o.store, w.id);
    if (loaded.revision >= w.revision || w.stale) {
      w.snapshot = loaded.snapshot;
      w.revision = loaded.revision;
      for (const e of loaded.events) note(w, asWorkflowEvent(e));
    }
    w.stale = false;
  }

  /** How a recorded step's execution ended, or undefined while it runs. */
  async function finalOutcome(w: Tracked, executionId: string, stepId: string): Promise<Outcome | undefined> {
    const info = track(w, executionId, stepId, 'check');
    if (info.final !== 'check') return info.final;
    try {
      info.final = outcomeOf(await o.runtime.load(executionId));
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      log.warn({ workflowId: w.id, stepId, executionId }, 'a recorded step execution does not exist');
      info.final = undefined;
    }
    return info.final;
  }

  async function mapLimit<T, R>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
    const out: R[] = new Array(items.length);
    let i = 0;
    await Promise.all(
      Array.from({ length: Math.min(parallelism, items.length) }, async () => {
        while (i < items.length) {
          const at = i++;
          out[at] = await fn(items[at]!);
        }
      }),
    );
    return out;
  }

  const meta = (w: Tracked) => ({ occurredAt: clock(), correlationId: w.id });

  /** Append at the revision the plan was made on. A lost race marks the workflow stale: the next round reloads and re-plans. */
  async function record(w: Tracked, base: { snapshot: WorkflowSnapshot; revision: bigint }, items: { event: WorkflowEvent; eventId: string }[]): Promise<boolean> {
    const decided = decideAll(w.id, base.snapshot, items);
    try {
      const r = await o.store.append(workflowStreamId(w.id), decided.events, { expectedRevision: base.revision });
      if (r.idempotentReplay) w.stale = true; // stored before by someone: what came after is unknown
      else if (w.revision < r.nextExpectedRevision) {
        w.snapshot = decided.snapshot;
        w.revision = r.nextExpectedRevision;
      }
      for (const { event } of items) note(w, event);
      if (!r.idempotentReplay) onRecorded(w, items.map((i) => i.event));
      return true;
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError || err instanceof DuplicateEventIdError) {
        metrics?.conflicts.inc();
        log.debug({ workflowId: w.id, err: err.message }, 'another executor moved the workflow on; re-planning');
        w.stale = true;
        return true;
      }
      throw err;
    }
  }

  function onRecorded(w: Tracked, events: WorkflowEvent[]): void {
    for (const e of events) {
      if (e.type === 'WorkflowStepScheduled') metrics?.scheduled.inc();
      if (e.type === 'WorkflowCompleted' || e.type === 'WorkflowFailed' || e.type === 'WorkflowCancelled') {
        const status = e.type.slice('Workflow'.length);
        metrics?.ended.inc({ status });
        const c = w.snapshot.context;
        const ms = Date.parse(c.finishedAt ?? clock().toISOString()) - Date.parse(c.startedAt);
        log.info({ workflowId: w.id, name: c.definition.name, status, ms, ...(e.type !== 'WorkflowCompleted' && { reason: e.data.reason }) }, `workflow ${w.id} ended ${status}`);
      }
    }
  }

  async function submitStep(w: Tracked, snapshot: WorkflowSnapshot, step: WorkflowStep): Promise<{ event: WorkflowEvent; eventId: string }> {
    const c = snapshot.context;
    const results = new Map(Object.entries(c.steps).flatMap(([id, s]) => (s.status === 'completed' ? [[id, s.result] as const] : [])));
    const parent = step.dependsOn[0];
    const parentId = parent === undefined ? undefined : c.steps[parent]?.executionId;
    const request = {
      action: step.action,
      input: stepInput(step, results),
      idempotencyKey: stepExecutionKey(w.id, step.id),
      workflowId: w.id,
      correlationId: w.id,
      ...(step.maxAttempts !== undefined && { maxAttempts: step.maxAttempts }),
      ...(step.priority !== undefined && { priority: step.priority }),
      ...(parentId !== undefined && { parentId }),
    };
    let executionId: string;
    try {
      executionId = (await o.runtime.submit(request)).executionId;
    } catch (err) {
      // Only the default maxAttempts can differ (an executor with another BATON_MAX_ATTEMPTS
      // submitted it first): the key names this workflow's step, so it is this step's execution.
      if (!(err instanceof IdempotencyKeyConflictError)) throw err;
      log.warn({ workflowId: w.id, stepId: step.id, executionId: err.executionId, err: err.message }, 'step execution exists with a different request; using it');
      executionId = err.executionId;
    }
    track(w, executionId, step.id);
    return { event: workflowEvent('WorkflowStepScheduled', { stepId: step.id, executionId }, meta(w)), eventId: workflowEventId(w.id, `${step.id}/scheduled`) };
  }

  async function cancel(w: Tracked, executionIds: readonly string[], reason: string): Promise<void> {
    const todo = executionIds.filter((id) => !w.cancelAsked.has(id) && (executions.get(id)?.final === undefined || executions.get(id)?.final === 'check'));
    await mapLimit(todo, async (executionId) => {
      w.cancelAsked.add(executionId);
      try {
        const r = await cancelExecution(o.runtime, executionId, reason);
        log.debug({ workflowId: w.id, executionId, outcome: r.outcome }, 'step execution cancel');
      } catch (err) {
        w.cancelAsked.delete(executionId); // try again next time
        throw err;
      }
    });
  }

  /** Executions of steps that will not be recorded (submitted, then the workflow moved on without them): cancel them. */
  function orphans(w: Tracked, notRunning: ReadonlySet<string>): string[] {
    const steps = w.snapshot.context.steps;
    return [...w.executions].filter(([, stepId]) => notRunning.has(stepId) && steps[stepId]?.status === 'pending').map(([id]) => id);
  }

  /** One round: record finished steps, cancel, schedule, or end. True when something was appended (or must be re-read). */
  async function advance(w: Tracked): Promise<boolean> {
    if (w.stale) await reload(w);
    const base = { snapshot: w.snapshot, revision: w.revision };
    const c = base.snapshot.context;
    if (base.snapshot.status === 'done') {
      await cancel(w, orphans(w, new Set(c.definition.steps.map((s) => s.id))), `workflow ${w.id} ended ${base.snapshot.value}; this step will not run`);
      forget(w);
      return false;
    }

    const finished: { event: WorkflowEvent; eventId: string }[] = [];
    for (const step of c.definition.steps) {
      const s = c.steps[step.id]!;
      if (s.status !== 'scheduled') continue;
      const end = await finalOutcome(w, s.executionId!, step.id);
      if (!end) continue;
      const data = { stepId: step.id, executionId: s.executionId!, outcome: end.outcome, ...(end.result !== undefined && { result: end.result as never }), ...(end.error && { error: end.error }) };
      finished.push({ event: workflowEvent('WorkflowStepFinished', data, meta(w)), eventId: workflowEventId(w.id, `${step.id}/finished`) });
    }
    if (finished.length > 0) return record(w, base, finished);

    const plan = workflowPlan(base.snapshot);
    if (plan.cancel.length > 0) {
      const reason = base.snapshot.value === 'Cancelling'
        ? `workflow ${w.id} cancelled: ${c.cancelReason}`
        : `workflow ${w.id} stops (fail-fast) after step(s) ${failedIds(base.snapshot).join(', ')} did not complete`;
      await cancel(w, plan.cancel.map((x) => x.executionId), reason);
    }
    await cancel(w, orphans(w, new Set(plan.skipped)), `workflow ${w.id} will not run this step`);

    if (plan.schedule.length > 0) {
      const items = await mapLimit(plan.schedule, (step) => submitStep(w, base.snapshot, step));
      return record(w, base, items);
    }
    if (plan.end) return record(w, base, [endEvent(w, base.snapshot, plan.end)]);
    return false;
  }

  function failedIds(snapshot: WorkflowSnapshot): string[] {
    return Object.entries(snapshot.context.steps).filter(([, s]) => s.status === 'failed').map(([id]) => id);
  }

  function endEvent(w: Tracked, snapshot: WorkflowSnapshot, type: 'WorkflowCompleted' | 'WorkflowFailed' | 'WorkflowCancelled') {
    const c = snapshot.context;
    const eventId = workflowEventId(w.id, 'end');
    if (type === 'WorkflowCompleted') return { event: workflowEvent(type, {}, meta(w)), eventId };
    if (type === 'WorkflowCancelled') return { event: workflowEvent(type, { reason: c.cancelReason ?? 'cancelled' }, meta(w)), eventId };
    // Steps cancelled because another failed (fail-fast) are not the cause: name the ones that failed.
    const notCompleted = Object.entries(c.steps).filter(([, s]) => s.status === 'failed');
    const causes = notCompleted.filter(([, s]) => s.outcome !== 'Cancelled');
    const named = (causes.length > 0 ? causes : notCompleted).map(([id]) => id);
    const describe = (id: string) => `${id} (${c.steps[id]!.outcome}${w.errors.has(id) ? `: ${w.errors.get(id)}` : ''})`;
    const cancelled = causes.length > 0 ? notCompleted.filter(([, s]) => s.outcome === 'Cancelled').map(([id]) => id) : [];
    const reason = `step${named.length === 1 ? '' : 's'} ${named.map(describe).join(', ')} did not complete${cancelled.length ? `; cancelled: ${cancelled.join(', ')}` : ''}`;
    return { event: workflowEvent(type, { reason: reason.slice(0, 2_000), failedSteps: named }, meta(w)), eventId };
  }

  // --- following the store -----------------------------------------------------------------

  const prefixes = [WORKFLOW_STREAM_PREFIX, EXECUTION_STREAM_PREFIX];
  const pause = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

  const ready = (async () => {
    let after = START;
    let backoffMs = 100;
    while (!ac.signal.aborted) {
      try {
        const batch = await o.store.readAll({ after, limit: 5_000, streamPrefixes: prefixes });
        if (batch.length === 0) break;
        for (const e of batch) apply(e);
        after = batch[batch.length - 1]!.globalPosition;
        backoffMs = 100;
      } catch (err) {
        log.error({ err, retryInMs: backoffMs }, 'orchestrator catch-up failed; retrying from the last event read');
        await pause(backoffMs);
        backoffMs = Math.min(backoffMs * 2, 5_000);
      }
    }
    caughtUp = true;
    log.info({ workflows: workflows.size }, 'workflow orchestrator caught up');
    for (const w of [...workflows.values()]) kick(w);
    return after;
  })();

  const following = ready.then((from) => followStore({ store: o.store, after: from, streamPrefixes: prefixes, signal: ac.signal, log, who: 'orchestrator' }, apply));
  following.catch((err: unknown) => {
    if (!ac.signal.aborted) log.fatal({ err }, 'orchestrator stopped following the event store');
  });

  const sweepEveryMs = o.sweepEveryMs ?? 10_000;
  const sweep = sweepEveryMs > 0 ? setInterval(() => caughtUp && workflows.forEach((w) => kick(w)), sweepEveryMs) : undefined;
  sweep?.unref();

  return {
    ready: ready.then(() => undefined),
    active: () => workflows.size,
    async stop() {
      ac.abort();
      clearInterval(sweep);
      await following.catch(() => undefined);
      await Promise.all([...workflows.values()].map((w) => (clearTimeout(w.retryTimer), w.running)));
    },
  };
}
