// Helpers every machine shares. Pure: no I/O, no clock.
import type { AnyMachineSnapshot, AnyStateMachine, EventFromLogic, SnapshotFrom } from 'xstate';
import type { Stepper } from './stepper.ts';

/** State name → the event types that state has transitions for, read once from the definition. */
export function acceptedEventTypes(machine: AnyStateMachine): Map<string, readonly string[]> {
  return new Map(Object.entries(machine.root.states).map(([status, node]) => [status, node.ownEvents]));
}

/**
 * Fold a stored history with a stepper (stepper.ts): from `initial`, each event in turn, with no
 * actor built per step or per fold (~1–4 µs a step for our flat machines, flat-steps.ts; ~15 µs
 * through xstate's macrostep, ~16 µs through one short-lived actor, ~60 µs through xstate's
 * transition()). Stored histories were decided by
 * the machine when appended, so a refusal means corruption or an incompatible machine change:
 * it throws, naming the event's index, its type, the state and `explain`'s reason.
 */
export function foldWith<M extends AnyStateMachine>(
  stepper: Stepper<M>,
  initial: SnapshotFrom<M>,
  events: readonly EventFromLogic<M>[],
  explain: (snapshot: SnapshotFrom<M>, event: EventFromLogic<M>) => string,
  /** The type of the history's first event when it made `initial` (events then count from 1). */
  startedBy?: string,
): SnapshotFrom<M> {
  const firstIndex = startedBy === undefined ? 0 : 1;
  let snapshot = initial;
  if ((snapshot as AnyMachineSnapshot).status === 'error') {
    throw new Error(`event 0 (${startedBy ?? 'start'}) could not be applied: ${String((snapshot as AnyMachineSnapshot).error)}`);
  }
  events.forEach((event, k) => {
    const i = firstIndex + k;
    if (!(snapshot as AnyMachineSnapshot).can(event)) {
      throw new Error(`event ${i} (${event.type}) refused in state ${String((snapshot as AnyMachineSnapshot).value)}: ${explain(snapshot, event)}`);
    }
    snapshot = stepper.next(snapshot, event);
    if ((snapshot as AnyMachineSnapshot).status === 'error') throw new Error(`event ${i} (${event.type}) could not be applied: ${String((snapshot as AnyMachineSnapshot).error)}`);
  });
  return snapshot;
}
