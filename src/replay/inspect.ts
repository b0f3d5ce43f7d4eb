// Time-travel: the state of one execution after each of its events, computed by folding the
// stream through the machine versions that wrote it (nothing is stored twice); the state at a
// revision or an instant; and what-if forks that continue a prefix with other events, purely
// through the current machine, writing nothing anywhere.
import { isDeepStrictEqual } from 'node:util';
import type { AnyMachineSnapshot } from 'xstate';
import {
  EXECUTOR,
  type Owner,
  allowedEventTypes,
  decideExecution,
  executionMachine,
  statusOf,
  type ExecutionContext,
  type ExecutionSnapshot,
} from '../../actors/execution.machine.ts';
import { UnknownMachineVersionError, machineForVersion, unknownMachineVersion } from '../../actors/execution-machine-versions.ts';
import { ExecutionEvent, type ExecutionEventType } from '../../schemas/events.ts';
import { InvalidEventError, InvalidTransitionError, zodIssues } from '../errors.ts';
import { droppedFields } from '../input/dropped-fields.ts';
import { asExecutionEvent, type HistoryEvent } from './history.ts';
import { MachineFold, stateOf } from './machine-fold.ts';

export interface NextEvent {
  type: ExecutionEventType;
  /** Who may append it: the owner, or the executor for the exceptions the ownership rule makes. */
  by: string;
}

export interface TimelineStep {
  revision: number;
  eventId: string;
  type: string;
  by: string;
  recordedAt: string;
  occurredAt: string;
  data: unknown;
  machineVersion: string | null;
  /** null for revision 0. */
  stateBefore: string | null;
  state: string;
  owner: string;
  attempt: number;
  context: ExecutionContext;
  /** Top-level context keys whose values this event changed (all of them for revision 0). */
  changed: string[];
  final: boolean;
  /** What could come next from here, by the current rules. */
  next: NextEvent[];
}

/**
 * Fold a history and keep every step. Throws, naming the revision, if the history does not fold,
 * or UnknownMachineVersionError at an event a machine version this build lacks wrote (not a refusal).
 */
export function timeline(executionId: string, events: readonly HistoryEvent[]): TimelineStep[] {
  const fold = new MachineFold((event) => machineForVersion(event.metadata.machineVersion));
  const steps: TimelineStep[] = [];
  try {
    for (const stored of events) {
      const version = unknownMachineVersion(stored.metadata);
      if (version !== undefined) throw new UnknownMachineVersionError(version, { executionId, revision: stored.revision, eventType: stored.type });
      const outcome = fold.apply(asExecutionEvent(stored));
      if (!outcome.ok) {
        throw new InvalidTransitionError(executionId, stored.type, steps.at(-1)?.state ?? '(none)', `stored event at revision ${stored.revision} does not fold: ${outcome.reason}`);
      }
      steps.push(toStep(stored, outcome.snapshot, steps.at(-1)));
    }
  } finally {
    fold.stop();
  }
  return steps;
}

function toStep(stored: HistoryEvent, snapshot: AnyMachineSnapshot, previous: TimelineStep | undefined): TimelineStep {
  const context = snapshot.context as ExecutionContext;
  return {
    revision: stored.revision,
    eventId: stored.eventId,
    type: stored.type,
    by: String(stored.metadata.by),
    recordedAt: stored.recordedAt,
    occurredAt: String(stored.metadata.occurredAt),
    data: stored.data,
    machineVersion: typeof stored.metadata.machineVersion === 'string' ? stored.metadata.machineVersion : null,
    stateBefore: previous?.state ?? null,
    state: stateOf(snapshot),
    owner: context.owner,
    attempt: context.attempt,
    context,
    changed: changedKeys(previous?.context, context),
    final: snapshot.status === 'done',
    next: nextEvents(snapshot as ExecutionSnapshot),
  };
}

function changedKeys(before: ExecutionContext | undefined, after: ExecutionContext): string[] {
  const keys = new Set([...Object.keys(before ?? {}), ...Object.keys(after)]) as Set<keyof ExecutionContext>;
  return [...keys].filter((k) => after[k] !== undefined || before?.[k] !== undefined).filter((k) => !before || !isDeepStrictEqual(before[k], after[k]));
}

/** Who sends `type` by default: the executor for the two it sends whoever holds the baton, else the owner. */
const senderOf = (type: string, owner: Owner) => (type === 'OwnershipReclaimed' || type === 'ExecutionCancelRequested' ? EXECUTOR : owner);

/** Event types the machine could take next, each with who may send it. */
export function nextEvents(snapshot: ExecutionSnapshot): NextEvent[] {
  const { owner, deadline } = snapshot.context;
  return allowedEventTypes(snapshot).flatMap((type): NextEvent[] => {
    if (senderOf(type, owner) === EXECUTOR && owner !== EXECUTOR) return [{ type, by: EXECUTOR }];
    // The executor may end a run past its recorded start-to-close deadline (machine v2).
    if (type === 'ExecutionTimedOut' && owner !== EXECUTOR && deadline !== null) return [{ type, by: owner }, { type, by: EXECUTOR }];
    return [{ type, by: owner }];
  });
}

export type InspectPoint = { revision: number } | { at: Date };

/** The step at a revision, or the last one recorded at or before an instant (undefined: nothing yet). */
export function stepAt(steps: readonly TimelineStep[], point: InspectPoint, revisionName = 'revision'): TimelineStep | undefined {
  if ('revision' in point) {
    const last = steps.at(-1)?.revision ?? -1;
    if (!Number.isInteger(point.revision) || point.revision < 0 || point.revision > last) {
      throw new InvalidEventError('inspect point', [{ path: revisionName, message: `must be a revision from 0 to ${last} (this history's), got ${point.revision}` }]);
    }
    return steps[point.revision];
  }
  const t = point.at.getTime();
  if (Number.isNaN(t)) throw new InvalidEventError('inspect point', [{ path: 'at', message: 'is not a valid time' }]);
  let found: TimelineStep | undefined;
  for (const step of steps) {
    if (Date.parse(step.recordedAt) > t) break;
    found = step;
  }
  return found;
}

// ---------------------------------------------------------------------------
// What-if forks.

/** An event to try: type and data, and optionally who sends it (default: the owner) and when. */
export interface ForkEventInput {
  type: string;
  data?: unknown;
  by?: string;
  occurredAt?: string;
}

export interface ForkStep {
  type: string;
  by: string;
  before: string;
  /** null when the machine refused it (and the fork stops there). */
  after: string | null;
  owner: string | null;
  refused?: string;
  context?: ExecutionContext;
}

export interface ForkResult {
  /** The revision the fork continues from. */
  forkAt: number;
  base: TimelineStep;
  steps: ForkStep[];
  /** Every event was accepted. */
  ok: boolean;
  finalState: string;
}

const FORK_EVENT_FIELDS = new Set(['type', 'data', 'by', 'occurredAt']);

/**
 * A fork event the catalog refuses. Its message counts the events from 1, as the what-if table's
 * `#` column and its "would not take event N" do; `index` is its place in the list (from 0) for
 * callers that name it by an array path (GraphQL's `events.0`).
 */
export class InvalidForkEventError extends InvalidEventError {
  constructor(
    readonly index: number,
    readonly eventType: string,
    issues: { path: string; message: string }[],
  ) {
    super(`fork event ${index + 1} (${eventType})`, issues);
  }
}

/**
 * Continue the history after `forkAt` with `inputs` instead of what really happened, through
 * the current machine. Pure: nothing is appended, published or projected.
 */
export function forkExecution(steps: readonly TimelineStep[], forkAt: number, inputs: readonly ForkEventInput[], now: () => Date = () => new Date()): ForkResult {
  const base = stepAt(steps, { revision: forkAt })!;
  if (inputs.length === 0) throw new InvalidEventError('fork', [{ path: 'event', message: 'give at least one event to try (--event \'{"type":…,"data":…}\')' }]);
  let snapshot = executionMachine.resolveState({ value: base.state, context: base.context }) as ExecutionSnapshot;
  const result: ForkStep[] = [];
  for (const [i, input] of inputs.entries()) {
    const unknown = Object.keys(input).filter((k) => !FORK_EVENT_FIELDS.has(k));
    const parsed = ExecutionEvent.safeParse({ type: input.type, data: input.data ?? {}, metadata: { by: input.by ?? senderOf(String(input.type), snapshot.context.owner), occurredAt: input.occurredAt ?? now().toISOString() } });
    if (!parsed.success) throw new InvalidForkEventError(i, input.type, zodIssues(parsed.error));
    const event = parsed.data;
    // The catalog's schemas drop fields they do not know; a what-if must not answer for an event
    // other than the one asked (a misspelt `retryabel` would be tried as if it were absent).
    const dropped = [...unknown, ...droppedFields(input.data ?? {}, event.data, 'data')];
    if (dropped.length > 0) throw new InvalidForkEventError(i, input.type, dropped.map((path) => ({ path, message: 'unknown field' })));
    const before = statusOf(snapshot);
    const decision = decideExecution(snapshot, event);
    if (!decision.ok) {
      result.push({ type: event.type, by: event.metadata.by, before, after: null, owner: null, refused: `${decision.rejection}: ${decision.reason}` });
      return { forkAt, base, steps: result, ok: false, finalState: before };
    }
    snapshot = decision.snapshot;
    result.push({ type: event.type, by: event.metadata.by, before, after: statusOf(snapshot), owner: snapshot.context.owner, context: snapshot.context });
  }
  return { forkAt, base, steps: result, ok: true, finalState: statusOf(snapshot) };
}
