// The workflow orchestrator: runs inside every executor process, keeps each running workflow
// moving (workflow-round.ts: record finished steps, cancel, schedule, end) and ends it.
//
// It reads nothing by itself: the actor runtime's follower (src/runtime/follow-actors.ts) folds
// every workflow and execution event once into the runtimes' snapshot caches, and the
// orchestrator acts on their changes. A workflow's state is its machine's snapshot; a step's
// outcome is its execution's final snapshot, seen here when the execution ends. Several
// executors run one each: every workflow append is a compare-and-swap with an id derived from
// its meaning, so the loser of a race plans again and nothing is stored twice. The orchestrator
// never appends to an execution stream itself: only runtime.submit (a new stream) and
// cancelExecution (which leaves a worker-held execution to its owner) touch them.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { WorkflowEvent } from '../../schemas/workflow-events.ts';
import type { ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import { Backoff } from '../async/backoff.ts';
import { createKick, kickWhenCaughtUp } from '../async/kick.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { Command } from '../runtime/actor-kind.ts';
import type { Change } from '../runtime/actor-runtime.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../runtime/execution-runtime.ts';
import { followActors, type ActorFollower } from '../runtime/follow-actors.ts';
import { advance, outcomeOf, stepOfKey, type FollowedWorkflow, type Outcome } from './workflow-round.ts';
import { createWorkflowRuntime, type WorkflowRuntime } from './workflow-stream.ts';

export { stepExecutionKey } from './workflow-round.ts';

/** The runtimes an executor host shares with its executor, and the one follower feeding them. */
export interface OrchestratorActors {
  executions: ExecutionRuntime;
  workflows: WorkflowRuntime;
  follower: ActorFollower;
}

export interface OrchestratorOptions {
  store: EventStore;
  log: Logger;
  /** Shared with other parts of the process (src/cli/hosts.ts); by default it makes its own and follows the store itself. */
  actors?: OrchestratorActors;
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

interface Followed extends FollowedWorkflow {
  running?: Promise<void>;
  again: boolean;
  backoff: Backoff;
}

function ownActors(o: OrchestratorOptions): OrchestratorActors {
  const options = o.clock ? { clock: o.clock } : {};
  const executions = createExecutionRuntime(o.store, options);
  const workflows = createWorkflowRuntime(o.store, options);
  return { executions, workflows, follower: followActors({ store: o.store, runtimes: [workflows, executions.actors], log: o.log, who: 'orchestrator' }) };
}

export function startOrchestrator(o: OrchestratorOptions): Orchestrator {
  const log = o.log;
  const owned = o.actors === undefined;
  const { executions, workflows, follower } = o.actors ?? ownActors(o);
  const followed = new Map<string, Followed>();
  /** Step executions of followed workflows: execution id → its workflow, and how it ended once it did. */
  const steps = new Map<string, { workflowId: string; ended?: Outcome }>();
  const ac = new AbortController();
  let caughtUp = false;

  const metrics = o.registry && {
    scheduled: new Counter({ name: 'baton_workflow_steps_scheduled_total', help: 'Workflow steps this executor recorded as scheduled', registers: [o.registry] }),
    ended: new Counter({ name: 'baton_workflows_ended_total', help: 'Workflows this executor ended', labelNames: ['status'], registers: [o.registry] }),
    conflicts: new Counter({ name: 'baton_workflow_conflicts_total', help: 'Workflow appends that lost a race to another executor (then re-planned)', registers: [o.registry] }),
    active: new Gauge({ name: 'baton_workflows_active', help: 'Workflows being orchestrated (not ended)', registers: [o.registry], collect() { this.set(followed.size); } }),
  };

  function trackStep(w: FollowedWorkflow, executionId: string, stepId: string): void {
    w.executions.set(executionId, stepId);
    if (!steps.has(executionId)) steps.set(executionId, { workflowId: w.id });
  }

  function forget(w: Followed): void {
    followed.delete(w.id);
    for (const id of w.executions.keys()) steps.delete(id);
  }

  function onWorkflowChange(change: Change<WorkflowSnapshot, WorkflowEvent>): void {
    let w = followed.get(change.id);
    if (!w) {
      // A workflow that ended before this process saw it start has nothing left to do.
      if (change.after.status === 'done' && change.before === undefined && change.source !== 'loaded') return;
      w = { id: change.id, executions: new Map(), errors: new Map(), cancelAsked: new Set(), again: false, backoff: new Backoff() };
      followed.set(change.id, w);
      const d = change.after.context.definition;
      if (caughtUp) log.info({ workflowId: change.id, name: d.name, steps: d.steps.length, onFailure: d.onFailure }, `workflow ${change.id} started`);
    }
    for (const { event } of change.events) {
      if (event.type === 'WorkflowStepScheduled') trackStep(w, event.data.executionId, event.data.stepId);
      if (event.type === 'WorkflowStepFinished' && event.data.error) w.errors.set(event.data.stepId, event.data.error.message);
    }
    if (!caughtUp && change.after.status === 'done') forget(w);
    else kick(w);
  }

  function onExecutionChange(change: Change<ExecutionSnapshot, ExecutionEvent>): void {
    const c = change.after.context;
    if (c.workflowId === undefined) return;
    const w = followed.get(c.workflowId);
    if (!w) return;
    const stepId = stepOfKey(c.idempotencyKey, w.id);
    if (stepId !== undefined) trackStep(w, change.id, stepId);
    const step = steps.get(change.id);
    const ended = outcomeOf(change.after);
    if (step && ended) {
      step.ended = ended;
      kick(w);
    }
  }

  // --- acting: one round at a time per workflow; a kick while one runs runs it once more after
  const round = {
    workflows,
    executions,
    log,
    parallelism: o.parallelism ?? 16,
    outcomeKnown: (executionId: string) => steps.get(executionId)?.ended,
    onConflict: () => metrics?.conflicts.inc(),
    onRecorded(w: FollowedWorkflow, snapshot: WorkflowSnapshot, commands: readonly Command<WorkflowEvent>[]) {
      for (const command of commands) {
        if (command.type === 'WorkflowStepScheduled') metrics?.scheduled.inc();
        if (command.type === 'WorkflowCompleted' || command.type === 'WorkflowFailed' || command.type === 'WorkflowCancelled') {
          const status = command.type.slice('Workflow'.length);
          metrics?.ended.inc({ status });
          const c = snapshot.context;
          const ms = Date.parse(c.finishedAt ?? new Date().toISOString()) - Date.parse(c.startedAt);
          const reason = (command.data as { reason?: string }).reason;
          log.info({ workflowId: w.id, name: c.definition.name, status, ms, ...(reason !== undefined && { reason }) }, `workflow ${w.id} ended ${status}`);
        }
      }
    },
  };

  const kick = createKick<Followed>({
    signal: ac.signal,
    active: (w) => caughtUp && followed.has(w.id),
    // Act until the plan asks for nothing more (bounded: a workflow has at most 1,000 steps).
    async round(w) {
      for (let n = 0; n < 5_000 && !ac.signal.aborted; n++) {
        const moved = await advance(round, w);
        if (moved === 'ended') {
          forget(w);
          return 'done';
        }
        if (!moved) break;
      }
    },
    failed: (w, err, retryInMs) => log.error({ workflowId: w.id, err, retryInMs }, 'orchestrating a workflow failed; will try again'),
  });

  const unsubscribe = [workflows.onChange(onWorkflowChange), executions.onChange(onExecutionChange)];
  const kicking = kickWhenCaughtUp({
    caughtUp: follower.ready,
    followed,
    kick,
    sweepEveryMs: o.sweepEveryMs ?? 10_000,
    onCaughtUp() {
      caughtUp = true;
      log.info({ workflows: followed.size }, 'workflow orchestrator caught up');
    },
  });

  return {
    ready: kicking.ready,
    active: () => followed.size,
    async stop() {
      ac.abort();
      if (owned) await follower.stop();
      for (const off of unsubscribe) off();
      await kicking.stop();
    },
  };
}
