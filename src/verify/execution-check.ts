// The per-execution half of the invariant checker: one stored stream in, a verdict out. Pure:
// no I/O and no clock (the caller passes `now`), so it is unit-tested on hand-made histories.
//
// Fast path: the machine's one-actor fold (foldExecution, ~4 µs an event). A stream that does
// not fold is walked again event by event with decideExecution (~25 µs an event), which says
// which event was refused and why, and keeps going past it so that a second terminal event or
// a second start of one attempt is still counted.
import {
  decideExecution,
  foldExecution,
  isFinal,
  startExecution,
  statusOf,
  type ExecutionSnapshot,
  type ExecutionStatus,
} from '../../actors/execution.machine.ts';
import { ExecutionEvent, terminalEventTypes, type ExecutionEventOf } from '../../schemas/events.ts';
import type { StoredEvent } from '../eventstore/event-store.ts';
import { zodIssues } from '../errors.ts';

/** DESIGN.md's invariants, by number. */
export type InvariantNumber = 1 | 2 | 3 | 4 | 5 | 6 | 7;

export interface InvariantViolation {
  invariant: InvariantNumber;
  /** The execution it concerns; null for a store-wide finding (the read model). */
  executionId: string | null;
  message: string;
}

export interface ExecutionVerdict {
  executionId: string;
  /** State after folding (refused events skipped); null when not even event 0 could be folded. */
  status: ExecutionStatus | null;
  /** Reached a final state of the machine. */
  final: boolean;
  /** Terminal events in the stream: exactly 1 when final, 0 otherwise, or the history is wrong. */
  terminalEvents: number;
  /** Attempts whose ExecutionStarted appears more than once. */
  duplicatedRuns: number;
  idempotencyKey?: string;
  /** Not final and past a dwell limit (or a pending decision) by more than `stuckAfterMs`. */
  overdue: boolean;
  violations: InvariantViolation[];
}

export interface CheckExecutionOptions {
  /** The reading of the clock that overdue is judged against. */
  now: Date;
  /** How far past a deadline a non-final execution may be before it counts as stuck. */
  stuckAfterMs: number;
}

const TERMINAL_TYPES: ReadonlySet<string> = new Set(terminalEventTypes);

const at = (e: StoredEvent) => `revision ${e.revision} (${e.type} by ${String(e.metadata.by)})`;

/** Check one execution's stream against invariants 2, 3 and 4 (and report what 1 and 6 need). */
export function checkExecution(executionId: string, events: readonly StoredEvent[], options: CheckExecutionOptions): ExecutionVerdict {
  const violations: InvariantViolation[] = [];
  const violate = (invariant: InvariantNumber, message: string) => violations.push({ invariant, executionId, message });
  const verdict = (v: Partial<ExecutionVerdict>): ExecutionVerdict => ({
    executionId,
    status: null,
    final: false,
    terminalEvents: 0,
    duplicatedRuns: 0,
    overdue: false,
    violations,
    ...v,
  });

  if (events.length === 0) {
    violate(3, 'the stream is empty');
    return verdict({});
  }

  // Invariant 3: contiguous revisions from 0, ExecutionRequested first.
  const gaps = events.flatMap((e, i) => (e.revision === BigInt(i) ? [] : [`position ${i} holds revision ${e.revision}`]));
  if (gaps.length > 0) violate(3, `revisions are not contiguous from 0: ${gaps.slice(0, 5).join('; ')}${gaps.length > 5 ? ` (+${gaps.length - 5} more)` : ''}`);
  const first = events[0]!;
  if (first.type !== 'ExecutionRequested') {
    violate(3, `the first event is ${first.type}, not ExecutionRequested`);
  }

  // Every stored event must still parse against the catalog; an event that does not is skipped.
  const parsed: { stored: StoredEvent; event: ExecutionEvent }[] = [];
  for (const stored of events) {
    const r = ExecutionEvent.safeParse({ type: stored.type, data: stored.data, metadata: stored.metadata });
    if (r.success) parsed.push({ stored, event: r.data });
    else violate(3, `${at(stored)} does not match the event catalog: ${zodIssues(r.error).map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`);
  }

  // Invariant 2, independent of the fold: each attempt starts at most once.
  const starts = new Map<number, StoredEvent[]>();
  for (const { stored, event } of parsed) {
    if (event.type !== 'ExecutionStarted') continue;
    starts.set(event.data.attempt, [...(starts.get(event.data.attempt) ?? []), stored]);
  }
  let duplicatedRuns = 0;
  for (const [attempt, list] of starts) {
    if (list.length < 2) continue;
    duplicatedRuns++;
    violate(2, `attempt ${attempt} started ${list.length} times (revisions ${list.map((e) => e.revision).join(', ')}): an action ran twice without a new attempt`);
  }

  const requested = parsed[0]?.event.type === 'ExecutionRequested' ? (parsed[0].event as ExecutionEventOf<'ExecutionRequested'>) : undefined;
  const idempotencyKey = requested?.data.idempotencyKey;
  if (!requested || parsed[0]!.stored !== first) {
    return verdict({ duplicatedRuns, ...(idempotencyKey !== undefined && { idempotencyKey }) });
  }

  let snapshot: ExecutionSnapshot;
  let terminalEvents: number;
  try {
    snapshot = foldExecution(parsed.map((p) => p.event));
    terminalEvents = isFinal(snapshot) ? 1 : 0;
  } catch {
    ({ snapshot, terminalEvents } = walk(parsed, starts, violate));
  }

  const final = isFinal(snapshot);
  if (terminalEvents > 1) {
    const list = parsed.filter((p) => TERMINAL_TYPES.has(p.event.type) || p.event.type === 'ExecutionFailed').map((p) => at(p.stored));
    violate(2, `${terminalEvents} terminal events; exactly one may end an execution (candidates: ${list.join('; ')})`);
  }
  return verdict({
    status: statusOf(snapshot),
    final,
    terminalEvents,
    duplicatedRuns,
    ...(idempotencyKey !== undefined && { idempotencyKey }),
    overdue: !final && isOverdue(snapshot, options),
  });
}

/**
 * The slow fold: decide each event in turn, report each refusal (invariant 4: after a handoff
 * only the owner moves the execution; the machine is where that rule lives), skip it, go on.
 */
function walk(
  parsed: { stored: StoredEvent; event: ExecutionEvent }[],
  starts: Map<number, StoredEvent[]>,
  violate: (invariant: InvariantNumber, message: string) => void,
): { snapshot: ExecutionSnapshot; terminalEvents: number } {
  let snapshot = startExecution(parsed[0]!.event);
  let terminalEvents = 0;
  for (const { stored, event } of parsed.slice(1)) {
    const decision = decideExecution(snapshot, event);
    if (decision.ok) {
      snapshot = decision.snapshot;
      if (isFinal(snapshot)) terminalEvents++;
      continue;
    }
    if (decision.rejection === 'AlreadyFinal' && (TERMINAL_TYPES.has(event.type) || event.type === 'ExecutionFailed')) {
      terminalEvents++; // reported once, as invariant 2, by the caller
      continue;
    }
    // A second start of the same attempt is already reported as a duplicated run.
    if (event.type === 'ExecutionStarted' && (starts.get(event.data.attempt)?.length ?? 0) > 1 && starts.get(event.data.attempt)![0] !== stored) continue;
    violate(4, `${at(stored)} does not fold in state ${statusOf(snapshot)} (owner ${snapshot.context.owner}): ${decision.rejection}: ${decision.reason}`);
  }
  return { snapshot, terminalEvents };
}

/**
 * Past the dwell limit the state itself carries, or waiting on a decision the executor makes at
 * once (retry or abandon; the second half of the scheduling append). A Requested execution that
 * waits for a fitting worker, or a Running one with no start-to-close limit, is never overdue:
 * nothing says how long it may take.
 */
function isOverdue(snapshot: ExecutionSnapshot, o: CheckExecutionOptions): boolean {
  const { context } = snapshot;
  const now = o.now.getTime();
  const past = (iso: string | undefined | null) => iso != null && now - Date.parse(iso) > o.stuckAfterMs;
  switch (statusOf(snapshot)) {
    case 'Scheduled':
    case 'Running':
      return past(context.deadline);
    case 'Scheduling':
      return past(context.updatedAt);
    case 'Requested':
      return context.retryPending && past(context.updatedAt);
    default:
      return false;
  }
}
