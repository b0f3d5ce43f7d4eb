// One workflow's stream (`workflow-<id>`): load and fold it through the workflow machine, and
// append orchestration events at the revision they were decided on. Every event id is derived
// from what the event means (uuid v5 of the workflow, the step and the kind), so an event
// appended twice, by a retry or by two executors racing, is stored once.
import { v5 as uuidv5 } from 'uuid';
import { WORKFLOW_MACHINE_VERSION, decideWorkflow, foldWorkflow, type WorkflowSnapshot } from '../../actors/workflow.machine.ts';
import { WorkflowEvent, workflowStreamId, type WorkflowEventOf } from '../../schemas/workflow-events.ts';
import { BatonError, NotFoundError, parseOrThrow } from '../errors.ts';
import type { EventStore, NewEvent, StoredEvent } from '../eventstore/event-store.ts';

/** Namespace of workflow event ids (uuid v5). Never change it: replays depend on it. */
const WORKFLOW_EVENT_NAMESPACE = '3c0f8a4e-5d2b-4f7a-9e61-7a1d2c9b8e05';

/** The deterministic id of a workflow event: `started`, `<step>/scheduled`, `<step>/finished`, `cancel-requested`, `end`. */
export const workflowEventId = (workflowId: string, what: string) => uuidv5(`${workflowId}/${what}`, WORKFLOW_EVENT_NAMESPACE);

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

export interface LoadedWorkflow {
  workflowId: string;
  snapshot: WorkflowSnapshot;
  /** Revision of the last event: the expected revision of the next append. */
  revision: bigint;
  events: StoredEvent[];
}

/** A stored event as the workflow machine reads it (validated: the stream may be old or foreign). */
export const asWorkflowEvent = (e: Pick<StoredEvent, 'type' | 'data' | 'metadata'>): WorkflowEvent =>
  parseOrThrow(WorkflowEvent, { type: e.type, data: e.data, metadata: e.metadata }, `stored ${e.type} event`);

export async function loadWorkflow(store: EventStore, workflowId: string): Promise<LoadedWorkflow> {
  const events = await store.readStream(workflowStreamId(workflowId), { limit: MAX_WORKFLOW_EVENTS + 1 });
  if (events.length === 0) throw new NotFoundError('workflow', workflowId);
  if (events.length > MAX_WORKFLOW_EVENTS) throw new BatonError(`workflow ${workflowId}: its stream has more than ${MAX_WORKFLOW_EVENTS} events, more than any workflow needs; refusing to fold it`);
  let snapshot: WorkflowSnapshot;
  try {
    snapshot = foldWorkflow(events.map(asWorkflowEvent));
  } catch (err) {
    throw new BatonError(`workflow ${workflowId}: its stream does not fold through workflow machine version ${WORKFLOW_MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
  }
  return { workflowId, snapshot, revision: events[events.length - 1]!.revision, events };
}

/** A workflow event with its metadata (appended by the executor, as the catalog says). */
export function workflowEvent<T extends WorkflowEvent['type']>(type: T, data: WorkflowEventOf<T>['data'], o: { occurredAt: Date; correlationId?: string }): WorkflowEvent {
  return parseOrThrow(
    WorkflowEvent,
    { type, data, metadata: { by: 'executor', occurredAt: o.occurredAt.toISOString(), machineVersion: WORKFLOW_MACHINE_VERSION, ...(o.correlationId && { correlationId: o.correlationId }) } },
    `${type} event`,
  );
}

export interface Decided {
  snapshot: WorkflowSnapshot;
  events: NewEvent[];
}

/** Decide the events in order through the machine (each records the state it led to). Throws WorkflowTransitionError on a refusal. */
export function decideAll(workflowId: string, snapshot: WorkflowSnapshot, items: readonly { event: WorkflowEvent; eventId: string }[]): Decided {
  const events: NewEvent[] = [];
  for (const { event, eventId } of items) {
    const d = decideWorkflow(snapshot, event);
    if (!d.ok) throw new WorkflowTransitionError(workflowId, event.type, d.reason);
    snapshot = d.snapshot;
    events.push({ eventId, type: event.type, data: event.data, metadata: { ...event.metadata, stateAfter: String(snapshot.value) } });
  }
  return { snapshot, events };
}
