// Every projection the projector runs, in the order it starts them.
import { executionEventsProjection } from './execution-events.ts';
import { executionsProjection } from './executions.projection.ts';
import type { Projection } from './projection.ts';
import { workersProjection } from './workers.ts';
import { schedulesProjection } from './schedules.ts';

export const projections: readonly Projection[] = [executionsProjection, executionEventsProjection, workersProjection, schedulesProjection];

/** The live read model's schema: what the API reads. */
export const READ_MODEL_SCHEMA = 'baton_read';

export type { Projection } from './projection.ts';
