// One workflow's stream (`workflow-<id>`) on the one actor runtime (src/runtime/workflow-kind.ts).
// Every event id is derived from what the event means (uuid v5 of the workflow, the step and
// the kind), so an event appended twice, by a retry or by two executors racing, is stored once.
import { v5 as uuidv5 } from 'uuid';
import type { WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import type { WorkflowEvent } from '../../schemas/workflow-events.ts';
import type { EventStore, StoredEvent } from '../eventstore/event-store.ts';
import { createActorRuntime, type ActorRuntime, type ActorRuntimeOptions } from '../runtime/actor-runtime.ts';
import { workflowKind } from '../runtime/workflow-kind.ts';

export { MAX_WORKFLOW_EVENTS, WorkflowTransitionError, asWorkflowEvent } from '../runtime/workflow-kind.ts';

/** Namespace of workflow event ids (uuid v5). Never change it: replays depend on it. */
const WORKFLOW_EVENT_NAMESPACE = '3c0f8a4e-5d2b-4f7a-9e61-7a1d2c9b8e05';

/** The deterministic id of a workflow event: `started`, `<step>/scheduled`, `<step>/finished`, `cancel-requested`, `end`. */
export const workflowEventId = (workflowId: string, what: string) => uuidv5(`${workflowId}/${what}`, WORKFLOW_EVENT_NAMESPACE);

export type WorkflowRuntime = ActorRuntime<WorkflowSnapshot, WorkflowEvent>;

export const createWorkflowRuntime = (store: EventStore, options: ActorRuntimeOptions = {}): WorkflowRuntime => createActorRuntime(store, workflowKind, options);

export interface LoadedWorkflow {
  workflowId: string;
  snapshot: WorkflowSnapshot;
  /** Revision of the last event: the expected revision of the next append. */
  revision: bigint;
  events: StoredEvent[];
}

/** The workflow folded from its whole stream (NotFoundError when there is none). */
export async function loadWorkflow(store: EventStore, workflowId: string): Promise<LoadedWorkflow> {
  const loaded = await createWorkflowRuntime(store).load(workflowId, { fresh: true });
  return { workflowId, snapshot: loaded.snapshot, revision: loaded.revision!, events: loaded.events! };
}
