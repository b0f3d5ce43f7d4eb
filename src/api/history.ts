// Time-travel fields: an execution's history and its state at a point, folded from the event
// store through the machine versions that wrote it (nothing is stored twice), and the machine's
// diagram. One fold per execution per request, however many fields ask for it.
import DataLoader from 'dataloader';
import { MACHINE_VERSION, executionMachine } from '../../actors/execution.machine.ts';
import type { ExecutionRow } from '../../projections/executions.ts';
import { stepAt, timeline, type TimelineStep } from '../replay/inspect.ts';
import { machineDiagram } from '../replay/machine-diagram.ts';
import { MAX_EVENTS_LIMIT, intInRange } from './arguments.ts';
import type { ApiContext } from './context.ts';
import { badInput } from './errors.ts';
import { jsonSize } from './json-size.ts';
import { formatBytes, jsonField } from './response-budget.ts';
import { readStoredOrArchivedHistory } from '../retention/archived-history.ts';

/** Events one request may fold in all (~4 µs each): a 100,000-event stream is ~0.4 s of CPU. */
export const FOLDED_EVENTS_PER_REQUEST = 100_000;
/**
 * Event data one request may fold, as JSON, in multiples of what it may send
 * (BATON_API_MAX_RESPONSE_BYTES; 8 MiB → 32 MiB). Folded streams stay in memory until the
 * response is sent, so streams are read one after another and none is read once this is
 * passed: a request holds at most this plus one stream, however large the results in it.
 */
export const FOLDED_BYTES_PER_RESPONSE_BYTE = 4;

// Keyed by the response's loaders, which each event of a subscription renews.
const timelines = new WeakMap<object, DataLoader<string, TimelineStep[]>>();

export function timelineOf(ctx: ApiContext, executionId: string): Promise<TimelineStep[]> {
  let loader = timelines.get(ctx.loaders);
  if (!loader) {
    let eventsLeft = FOLDED_EVENTS_PER_REQUEST;
    const foldedBytes = ctx.budget.limits.maxResponseBytes * FOLDED_BYTES_PER_RESPONSE_BYTE;
    let bytesLeft = foldedBytes;
    let previous: Promise<unknown> = Promise.resolve();
    const fold = async (id: string) => {
      if (eventsLeft < 0 || bytesLeft < 0) throw tooMuchToFold(foldedBytes);
      const { events } = await readStoredOrArchivedHistory(ctx.runtime.store, ctx.pool, id); // an archived one from its file
      eventsLeft -= events.length;
      for (const e of events) bytesLeft -= jsonSize(e.data, bytesLeft + 1);
      if (eventsLeft < 0 || bytesLeft < 0) throw tooMuchToFold(foldedBytes);
      return timeline(id, events);
    };
    loader = new DataLoader(
      (ids) =>
        Promise.all(
          ids.map((id) => {
            const turn = previous.then(() => fold(id));
            previous = turn.catch(() => undefined);
            return turn;
          }),
        ),
      { batch: false },
    );
    timelines.set(ctx.loaders, loader);
  }
  return loader.load(executionId);
}

const tooMuchToFold = (foldedBytes: number) =>
  badInput(
    'history',
    `this request would fold more than ${FOLDED_EVENTS_PER_REQUEST} events or ${formatBytes(foldedBytes)} of event data ` +
      `(${FOLDED_BYTES_PER_RESPONSE_BYTE} × BATON_API_MAX_RESPONSE_BYTES); ask for fewer executions`,
  );

const diagram = machineDiagram(executionMachine, MACHINE_VERSION);

const toState = (step: TimelineStep) => ({
  revision: step.revision,
  status: step.state,
  owner: step.owner,
  attempt: step.attempt,
  context: step.context,
  final: step.final,
  event: step,
  next: step.next,
});

export const historyResolvers = {
  Query: {
    executionMachine: () => diagram,
  },
  HistoryStep: {
    data: jsonField((step: TimelineStep) => step.data, 'error-key'),
    context: jsonField((step: TimelineStep) => step.context, 'error-key'),
  },
  ExecutionState: {
    context: jsonField((state: ReturnType<typeof toState>) => state.context, 'error-key'),
  },
  Execution: {
    async history(row: ExecutionRow, a: { fromRevision: number; limit: number }, ctx: ApiContext) {
      const from = intInRange(a.fromRevision, 'fromRevision', 0, Number.MAX_SAFE_INTEGER);
      const limit = intInRange(a.limit, 'limit', 1, MAX_EVENTS_LIMIT);
      return (await timelineOf(ctx, row.executionId)).slice(from, from + limit);
    },
    async stateAt(row: ExecutionRow, a: { revision?: number | null; at?: string | null }, ctx: ApiContext) {
      const hasRevision = a.revision !== undefined && a.revision !== null;
      const hasAt = a.at !== undefined && a.at !== null;
      if (hasRevision === hasAt) throw badInput(hasRevision ? 'at' : 'revision', 'give exactly one of revision and at');
      const steps = await timelineOf(ctx, row.executionId);
      if (hasRevision) {
        const last = steps.length - 1;
        return toState(steps[intInRange(a.revision!, 'revision', 0, last)]!);
      }
      const step = stepAt(steps, { at: new Date(a.at!) });
      return step ? toState(step) : null;
    },
  },
};
