// Every projection the projector runs, in the order it starts them.
import { executionEventsProjection } from './execution-events.ts';
import { executionsProjection, executionsRepairProjection } from './executions.projection.ts';
import type { Projection } from './projection.ts';
import { workersProjection } from './workers.ts';
import { schedulesProjection } from './schedules.ts';

export const projections: readonly Projection[] = [executionsProjection, executionEventsProjection, workersProjection, schedulesProjection];

/**
 * The projections as the projector runs them for BATON_EXECUTION_ROWS: with `appenders`, the
 * executions rows are written by the processes that append, and the projector repairs them.
 */
export const projectionsFor = (executionRows: 'projector' | 'appenders'): readonly Projection[] =>
  executionRows === 'projector' ? projections : projections.map((p) => (p === executionsProjection ? executionsRepairProjection : p));

/** The live read model's schema: what the API reads. */
export const READ_MODEL_SCHEMA = 'baton_read';

export type { Projection } from './projection.ts';
