// The workflow event catalog: one stream per workflow (`workflow-<id>`), appended only by the
// executor that orchestrates it. Its steps are ordinary executions (with workflowId/parentId);
// these events record the orchestration decisions, so another executor can continue from them.
import { z } from 'zod';
import { jsonValue, text } from '../src/input/schemas.ts';
import { ErrorInfo, EventMetadata, ExecutorRef, Namespace } from './events.ts';
import { StepId, WorkflowDefinition } from './workflow.ts';

const event = <T extends string, D extends z.ZodType>(type: T, data: D) =>
  z.object({ type: z.literal(type), data, metadata: EventMetadata.extend({ by: ExecutorRef }) });

/** How a step's execution ended, as its final state names it. */
export const StepOutcome = z.enum(['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned']);
export type StepOutcome = z.infer<typeof StepOutcome>;

/** `namespace`: where the workflow and its steps' executions live; absent (and before namespaces): `default`. */
export const WorkflowStarted = event('WorkflowStarted', z.object({ definition: WorkflowDefinition, namespace: Namespace.optional() }));
export const WorkflowStepScheduled = event('WorkflowStepScheduled', z.object({ stepId: StepId, executionId: text().min(1) }));
export const WorkflowStepFinished = event(
  'WorkflowStepFinished',
  z.object({ stepId: StepId, executionId: text().min(1), outcome: StepOutcome, result: jsonValue().optional(), error: ErrorInfo.optional() }),
);
export const WorkflowCancelRequested = event('WorkflowCancelRequested', z.object({ reason: text().min(1) }));
export const WorkflowCompleted = event('WorkflowCompleted', z.object({}));
export const WorkflowFailed = event('WorkflowFailed', z.object({ reason: text().min(1), failedSteps: z.array(StepId).min(1) }));
export const WorkflowCancelled = event('WorkflowCancelled', z.object({ reason: text().min(1) }));

export const WorkflowEvent = z.discriminatedUnion('type', [
  WorkflowStarted,
  WorkflowStepScheduled,
  WorkflowStepFinished,
  WorkflowCancelRequested,
  WorkflowCompleted,
  WorkflowFailed,
  WorkflowCancelled,
]);
export type WorkflowEvent = z.infer<typeof WorkflowEvent>;
export type WorkflowEventOf<T extends WorkflowEvent['type']> = Extract<WorkflowEvent, { type: T }>;

export const WORKFLOW_STREAM_PREFIX = 'workflow-';
export const workflowStreamId = (workflowId: string) => `${WORKFLOW_STREAM_PREFIX}${workflowId}`;
export const workflowIdOfStream = (streamId: string): string | undefined =>
  streamId.startsWith(WORKFLOW_STREAM_PREFIX) && streamId.length > WORKFLOW_STREAM_PREFIX.length ? streamId.slice(WORKFLOW_STREAM_PREFIX.length) : undefined;
