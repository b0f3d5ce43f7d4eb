// Folding one history through an execution machine chosen per event, one event at a time, so
// a caller can look at every step. Replay folds twice with it: once with the machine each event
// was written by (its recorded machineVersion), once with the machine under test.
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { SAMPLE_REQUEST, decideExecution, executionMachine, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { stepperOf, type Stepper } from '../../actors/stepper.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';

export type MachineChoice = (event: ExecutionEvent) => AnyStateMachine;

export type FoldOutcome = { ok: true; snapshot: AnyMachineSnapshot } | { ok: false; reason: string };

export const stateOf = (snapshot: AnyMachineSnapshot): string => String(snapshot.value);

/** Does this machine define a top-level state with this name? */
export const hasState = (machine: AnyStateMachine, state: string): boolean => Object.hasOwn(machine.root.states, state);

/** Event types the machine handles in `state` (any sender, any data), read from the definition. */
export function handledIn(machine: AnyStateMachine, state: string): readonly string[] {
  return hasState(machine, state) ? machine.root.states[state]!.ownEvents : [];
}

/** Why `machine` will not take `event` now, in words; the current machine classifies exactly. */
export function explainRefusal(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: ExecutionEvent): string {
  if (machine === executionMachine) {
    const decision = decideExecution(snapshot as ExecutionSnapshot, event);
    if (!decision.ok) return `${decision.rejection}: ${decision.reason}`;
  }
  const state = stateOf(snapshot);
  if (snapshot.status === 'done') return `the execution is already ${state}; it accepts no further events`;
  return handledIn(machine, state).includes(event.type)
    ? `${event.type} is refused in state ${state} (a guard rejects it)`
    : `${event.type} is not handled in state ${state}`;
}

const steppers = new WeakMap<AnyStateMachine, Stepper<AnyStateMachine>>();
/** One stepper per machine (stepper.ts): every execution machine version takes the same input. */
function stepperFor(machine: AnyStateMachine): Stepper<AnyStateMachine> {
  let s = steppers.get(machine);
  if (!s) steppers.set(machine, (s = stepperOf(machine, SAMPLE_REQUEST)));
  return s;
}

/**
 * A fold one event at a time, each through the machine `choose` names for it (stepper.ts: no
 * actor per step). When the next event names another machine, the current state and context
 * carry over to it.
 */
export class MachineFold {
  private current: AnyMachineSnapshot | undefined;
  private machine: AnyStateMachine | undefined;

  constructor(private readonly choose: MachineChoice) {}

  get snapshot(): AnyMachineSnapshot | undefined {
    return this.current;
  }

  /** The machine the last event was folded with. */
  get currentMachine(): AnyStateMachine | undefined {
    return this.machine;
  }

  apply(event: ExecutionEvent): FoldOutcome {
    let machine: AnyStateMachine;
    try {
      machine = this.choose(event);
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
    if (!this.current) {
      if (event.type !== 'ExecutionRequested') return { ok: false, reason: `a history must start with ExecutionRequested, not ${event.type}` };
      this.machine = machine;
      return this.settle(() => stepperFor(machine).initial(event));
    }
    let before = this.current;
    if (machine !== this.machine) {
      const state = stateOf(before);
      if (!hasState(machine, state)) return { ok: false, reason: `state ${state} does not exist in this machine` };
      before = machine.resolveState({ value: before.value, context: before.context });
      this.machine = machine;
      this.current = before;
    }
    if (!before.can(event)) return { ok: false, reason: explainRefusal(machine, before, event) };
    return this.settle(() => stepperFor(machine).next(before, event));
  }

  stop(): void {
    this.current = undefined;
  }

  /** A candidate machine may throw in its own code: that is a divergence to report, not a crash. */
  private settle(step: () => AnyMachineSnapshot): FoldOutcome {
    let snapshot: AnyMachineSnapshot;
    try {
      snapshot = step();
    } catch (err) {
      return { ok: false, reason: `the machine failed: ${String(err)}` };
    }
    if (snapshot.status === 'error') return { ok: false, reason: `the machine failed: ${String(snapshot.error)}` };
    this.current = snapshot;
    return { ok: true, snapshot };
  }
}
