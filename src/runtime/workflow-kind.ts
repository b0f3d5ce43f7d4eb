// Workflows as the actor runtime sees them: streams `workflow-<id>` (bounded: a definition has
// at most 1,000 steps), the workflow machine's decisions, and its refusals as
// WorkflowTransitionError. Stored events are validated when read: the stream may be old or foreign.
import { WORKFLOW_MACHINE_VERSION, decideWorkflow, foldWorkflow, startWorkflow, type WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import { WORKFLOW_STREAM_PREFIX, WorkflowEvent, workflowIdOfStream, workflowStreamId } from '../../schemas/workflow-events.ts';
import { BatonError, parseOrThrow } from '../errors.ts';
import type { ActorKind } from './actor-kind.ts';

/**
 * A workflow stream has one WorkflowStarted, at most two events per step and a few more: with
 * the 1,000-step limit of a definition, 2,100 covers any stream a correct orchestrator writes.
 * Reading stops there, so one request can never fold an unbounded stream.
 */
export const MAX_WORKFLOW_EVENTS = 2_100;

/** The machine refused an orchestration event: a bug, or a stream written by something else. */
export class WorkflowTransitionError extends BatonError {
  constructor(readonly workflowId: string, readonly eventType: string, reason: string) {
    super(`workflow ${workflowId}: ${eventType} refused: ${reason}`);
  }
}

/** A stored event as the workflow machine reads it (validated: the stream may be old or foreign). */
export const asWorkflowEvent = (e: { type: string; data: unknown; metadata: unknown }): WorkflowEvent =>
  parseOrThrow(WorkflowEvent, { type: e.type, data: e.data, metadata: e.metadata }, `stored ${e.type} event`);

export const workflowKind: ActorKind<WorkflowSnapshot, WorkflowEvent> = {
  name: 'workflow',
  machineVersion: WORKFLOW_MACHINE_VERSION,
  streamPrefix: WORKFLOW_STREAM_PREFIX,
  streamId: workflowStreamId,
  idOf: workflowIdOfStream,
  read: asWorkflowEvent,
  make: (c, occurredAt) =>
    parseOrThrow(
      WorkflowEvent,
      { type: c.type, data: c.data, metadata: { by: c.by, occurredAt, machineVersion: WORKFLOW_MACHINE_VERSION, ...(c.correlationId && { correlationId: c.correlationId }) } },
      `${c.type} event`,
    ),
  decide(id, before, event) {
    if (before === undefined) {
      if (event.type === 'WorkflowStarted') return { ok: true, snapshot: startWorkflow(event) };
      return { ok: false, error: new WorkflowTransitionError(id, event.type, 'a workflow starts with WorkflowStarted') };
    }
    const d = decideWorkflow(before, event);
    return d.ok ? d : { ok: false, error: new WorkflowTransitionError(id, event.type, d.reason) };
  },
  fold(id, events) {
    try {
      return foldWorkflow(events);
    } catch (err) {
      throw new BatonError(`workflow ${id}: its stream does not fold through workflow machine version ${WORKFLOW_MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
    }
  },
  isFinal: (s) => s.status === 'done',
  maxEvents: MAX_WORKFLOW_EVENTS,
};
