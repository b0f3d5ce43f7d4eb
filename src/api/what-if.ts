// `Execution.whatIf`: the replay tools' what-if fork (src/replay/inspect.ts) over GraphQL, for the
// console's statechart. Read-only like `baton inspect --fork-at`: the history is folded and
// continued through the current machine in memory; nothing is appended, published or projected.
import type { ExecutionRow } from '../../projections/executions.ts';
import { forkExecution, InvalidForkEventError, type ForkStep } from '../replay/inspect.ts';
import { intInRange, textArg } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { ApiError, badInput, problemsOf } from './errors.ts';
import { timelineOf } from './history.ts';
import { jsonField } from './response-budget.ts';

export const MAX_WHAT_IF_EVENTS = 20;

export interface WhatIfEventInput {
  type: string;
  data?: unknown;
  by?: string | null;
}

async function whatIf(row: ExecutionRow, a: { fromRevision: number; events: WhatIfEventInput[] }, ctx: ApiContext) {
  if (a.events.length < 1 || a.events.length > MAX_WHAT_IF_EVENTS) throw badInput('events', `give 1 to ${MAX_WHAT_IF_EVENTS} events, got ${a.events.length}`);
  const inputs = a.events.map((e, i) => ({
    type: textArg(e.type, `events.${i}.type`, 100),
    ...(e.data != null && { data: e.data }),
    ...(e.by != null && { by: textArg(e.by, `events.${i}.by`, 300) }),
  }));
  const steps = await timelineOf(ctx, row.executionId);
  const fromRevision = intInRange(a.fromRevision, 'fromRevision', 0, steps.length - 1);
  try {
    const fork = forkExecution(steps, fromRevision, inputs);
    return { fromRevision, baseState: fork.base.state, ok: fork.ok, finalState: fork.finalState, steps: fork.steps };
  } catch (err) {
    // An event the catalog does not accept: named by its path in `events` (from 0, as GraphQL's
    // own paths and `events.0.type` above count), not by the CLI's "fork event 1".
    if (err instanceof InvalidForkEventError) {
      const issues = err.issues.map((i) => ({ path: [`events.${err.index}`, ...(i.path ? [i.path] : [])].join('.'), message: i.message }));
      throw new ApiError('BAD_USER_INPUT', issues.map((i) => `${i.path}: ${i.message}`).join('; '), 'events', { problems: problemsOf(issues), issues });
    }
    throw err;
  }
}

export const whatIfResolvers = {
  Execution: { whatIf },
  WhatIfStep: {
    context: jsonField((step: ForkStep) => step.context ?? null, 'error-key'),
  },
};
