// Replay: fold a stored history through a machine under test and compare every step with what
// was recorded when the event was appended. The recorded state of an event is its
// metadata.stateAfter (written by the runtime since machine version 2's replay support) or,
// for older events, the state the machine version it names (metadata.machineVersion) gives.
//
// A divergence is any of: the machine under test refuses an event the store holds
// (`unhandled-event`); it reaches another state than the recorded one (`different-state`);
// the recorded state no longer exists (`removed-state`); or, for an execution still in flight,
// its current state no longer handles an event the recorded machine expects next, so it could
// never move on (`stranded`). A history the recorded machines cannot read is `unreadable`, and so
// is one naming a machine version this build does not have (a newer Baton wrote it): nothing
// here can say how its events were decided, so it is not replayed from there, against any machine.
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { executionMachine, MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { machineForVersion, unknownMachineVersion, unknownMachineVersionReason } from '../../actors/execution-machine-versions.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import { asExecutionEvent, type HistoryEvent } from './history.ts';
import { MachineFold, handledIn, hasState, stateOf, type MachineChoice } from './machine-fold.ts';

/** What to replay against: the machine each event was written by, or one machine for every event. */
export type ReplayTarget = { kind: 'recorded' } | { kind: 'machine'; machine: AnyStateMachine; label: string };

export const CURRENT_MACHINE: ReplayTarget = { kind: 'machine', machine: executionMachine, label: `current (version ${MACHINE_VERSION})` };
export const RECORDED_MACHINES: ReplayTarget = { kind: 'recorded' };

export const describeTarget = (t: ReplayTarget) => (t.kind === 'recorded' ? 'the machine version each event was written by' : t.label);

export type DivergenceKind = 'unhandled-event' | 'different-state' | 'removed-state' | 'stranded' | 'unreadable';

export interface Divergence {
  executionId: string;
  kind: DivergenceKind;
  /** The event where it showed (for `stranded`, the last event). */
  revision: number;
  eventType: string;
  /** The recorded state after that event. */
  expected: string | null;
  /** The state the machine under test reached, or null when it refused. */
  actual: string | null;
  reason: string;
}

export interface ReplayStep {
  revision: number;
  type: string;
  by: string;
  machineVersion: string | null;
  /** The machine under test's state before and after; null once it stopped (refused earlier). */
  before: string | null;
  after: string | null;
  /** The recorded state after this event. */
  expected: string | null;
  /** Who owns the execution after this event, by the machine under test. */
  owner: string | null;
  divergence?: Divergence;
}

export interface StreamVerdict {
  executionId: string;
  events: number;
  /** The recorded state after the last event. */
  recordedState: string | null;
  /** The execution has not reached a final state (by the recorded machines). */
  inFlight: boolean;
  /** At most one step divergence (the first; later steps are not compared) and a `stranded` one. */
  divergences: Divergence[];
}

const recordedChoice: MachineChoice = (event) => machineForVersion(event.metadata.machineVersion);

/** Replays one execution's history event by event; feed() the events in revision order, then finish(). */
export class StreamReplay {
  private readonly recorded = new MachineFold(recordedChoice);
  private readonly underTest: MachineFold;
  private readonly divergences: Divergence[] = [];
  private recordedUnreadable = false;
  private sawUnknownVersion = false;
  private underTestStopped = false;
  private last: { event: HistoryEvent; expected: string | null } | undefined;
  private events = 0;

  constructor(
    readonly executionId: string,
    private readonly target: ReplayTarget,
  ) {
    this.underTest = target.kind === 'recorded' ? new MachineFold(recordedChoice) : new MachineFold(() => target.machine);
  }

  feed(stored: HistoryEvent): ReplayStep {
    this.events++;
    const event = asExecutionEvent(stored);
    const expected = this.recordedStateAfter(stored, event);
    const before = this.underTestStopped ? null : this.underTest.snapshot;
    const step: ReplayStep = {
      revision: stored.revision,
      type: stored.type,
      by: String(stored.metadata.by ?? '?'),
      machineVersion: typeof stored.metadata.machineVersion === 'string' ? stored.metadata.machineVersion : null,
      before: before ? stateOf(before) : null,
      after: null,
      expected,
      owner: null,
    };
    this.last = { event: stored, expected };
    if (this.unknownVersion(step, stored)) return step;
    if (this.underTestStopped) return step;

    const outcome = this.underTest.apply(event);
    if (!outcome.ok) {
      const removed = step.before !== null && !hasState(this.machineUnderTest(event), step.before);
      this.diverge(step, removed ? 'removed-state' : 'unhandled-event', outcome.reason);
      return step;
    }
    step.after = stateOf(outcome.snapshot);
    step.owner = ownerOf(outcome.snapshot);
    if (expected !== null && step.after !== expected) {
      const removed = !hasState(this.machineUnderTest(event), expected);
      this.diverge(step, removed ? 'removed-state' : 'different-state', removed ? `state ${expected} no longer exists; the event now leads to ${step.after}` : `the event now leads to ${step.after}, not ${expected}`);
    }
    return step;
  }

  /** The history reached a final state (by the recorded machines): nothing can follow. */
  get recordedFinal(): boolean {
    return this.recorded.snapshot?.status === 'done';
  }

  /** The verdict; checks that an execution in flight can still move on. Stops the actors. */
  finish(): StreamVerdict {
    const recordedState = this.last?.expected ?? null;
    const recordedSnapshot = this.recorded.snapshot;
    // Unreadable from its first event, no recorded machine was chosen: today's says what is final.
    const inFlight = this.recordedUnreadable
      ? recordedState !== null && !isFinalIn(this.recorded.currentMachine ?? executionMachine, recordedState)
      : recordedSnapshot !== undefined && recordedSnapshot.status !== 'done';
    if (inFlight && !this.underTestStopped && this.last && recordedState !== null) this.checkStranded(this.last.event, recordedState);
    this.recorded.stop();
    this.underTest.stop();
    return { executionId: this.executionId, events: this.events, recordedState, inFlight, divergences: this.divergences };
  }

  private recordedStateAfter(stored: HistoryEvent, event: ExecutionEvent): string | null {
    const written = typeof stored.metadata.stateAfter === 'string' ? stored.metadata.stateAfter : null;
    if (this.recordedUnreadable || unknownMachineVersion(stored.metadata) !== undefined) return written;
    const outcome = this.recorded.apply(event);
    if (outcome.ok) return written ?? stateOf(outcome.snapshot);
    this.recordedUnreadable = true;
    if (written === null) {
      this.divergences.push({
        executionId: this.executionId,
        kind: 'unreadable',
        revision: stored.revision,
        eventType: stored.type,
        expected: null,
        actual: null,
        reason: `the machine version it was written by cannot read it: ${outcome.reason}`,
      });
      this.underTestStopped = true;
    }
    return written;
  }

  /**
   * The first event naming a machine version this build does not have: `unreadable` there, saying
   * so (not a refusal: no machine here was asked), and nothing after it is replayed.
   */
  private unknownVersion(step: ReplayStep, stored: HistoryEvent): boolean {
    if (this.sawUnknownVersion) return true;
    const version = unknownMachineVersion(stored.metadata);
    if (version === undefined) return false;
    this.sawUnknownVersion = true;
    this.recordedUnreadable = true;
    const divergence: Divergence = { executionId: this.executionId, kind: 'unreadable', revision: step.revision, eventType: step.type, expected: step.expected, actual: null, reason: unknownMachineVersionReason(version) };
    this.divergences.push(divergence);
    if (!this.underTestStopped) step.divergence = divergence;
    this.underTestStopped = true;
    return true;
  }

  private checkStranded(last: HistoryEvent, state: string): void {
    const underTest = this.underTest.currentMachine;
    const recordedMachine = safeMachineFor(last);
    if (!underTest || !recordedMachine) return;
    const handled = new Set(handledIn(underTest, state));
    const missing = handledIn(recordedMachine, state).filter((type) => !handled.has(type));
    if (missing.length === 0) return;
    this.divergences.push({
      executionId: this.executionId,
      kind: hasState(underTest, state) ? 'stranded' : 'removed-state',
      revision: last.revision,
      eventType: last.type,
      expected: state,
      actual: stateOf(this.underTest.snapshot!),
      reason: hasState(underTest, state)
        ? `in flight in ${state}, which no longer handles ${missing.join(', ')}: it could not move on`
        : `in flight in ${state}, which no longer exists`,
    });
  }

  private machineUnderTest(event: ExecutionEvent): AnyStateMachine {
    return this.target.kind === 'machine' ? this.target.machine : (safeMachineFor({ metadata: event.metadata }) ?? executionMachine);
  }

  private diverge(step: ReplayStep, kind: DivergenceKind, reason: string): void {
    step.divergence = { executionId: this.executionId, kind, revision: step.revision, eventType: step.type, expected: step.expected, actual: step.after, reason };
    this.divergences.push(step.divergence);
    this.underTestStopped = true;
  }
}

function safeMachineFor(e: { metadata: Record<string, unknown> }): AnyStateMachine | undefined {
  try {
    return machineForVersion(e.metadata.machineVersion as string | undefined);
  } catch {
    return undefined;
  }
}

const ownerOf = (snapshot: AnyMachineSnapshot): string | null => {
  const owner = (snapshot.context as { owner?: unknown } | undefined)?.owner;
  return typeof owner === 'string' ? owner : null;
};

const isFinalIn = (machine: AnyStateMachine | undefined, state: string) => machine !== undefined && hasState(machine, state) && machine.root.states[state]!.type === 'final';

/** Replay a whole history at once. */
export function replayHistory(executionId: string, events: readonly HistoryEvent[], target: ReplayTarget = CURRENT_MACHINE): { steps: ReplayStep[]; verdict: StreamVerdict } {
  const replay = new StreamReplay(executionId, target);
  const steps = events.map((e) => replay.feed(e));
  return { steps, verdict: replay.finish() };
}

export function describeDivergence(d: Divergence): string {
  // Neither compares states: a stranded execution is in the recorded one, an unreadable one was not replayed.
  const states = d.kind === 'stranded' || d.kind === 'unreadable' ? '' : ` (recorded: ${d.expected ?? '?'}, now: ${d.actual ?? 'refused'})`;
  return `${d.executionId} @${d.revision} ${d.eventType}: ${d.kind}${states}: ${d.reason}`;
}
