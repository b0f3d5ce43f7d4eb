// Helpers every machine shares. Pure: no I/O, no clock.
import { createActor, type AnyMachineSnapshot, type AnyStateMachine, type EventFromLogic, type InputFrom, type SnapshotFrom } from 'xstate';

/** State name → the event types that state has transitions for, read once from the definition. */
export function acceptedEventTypes(machine: AnyStateMachine): Map<string, readonly string[]> {
  return new Map(Object.entries(machine.root.states).map(([status, node]) => [status, node.ownEvents]));
}

/**
 * Fold a stored history through one short-lived actor. xstate's pure `transition()` builds a
 * throwaway actor on every call (~25 µs); one actor takes the same transitions at ~4 µs an
 * event, which keeps a 1,000-event rehydration well under 20 ms. It has nothing to run but
 * `assign`, so folding stays free of effects. Stored histories were decided by the machine when
 * appended, so a refusal means corruption or an incompatible machine change: it throws, naming
 * the event's index, its type, the state and `explain`'s reason.
 */
export function foldWithActor<M extends AnyStateMachine>(
  machine: M,
  input: InputFrom<M>,
  events: readonly EventFromLogic<M>[],
  explain: (snapshot: SnapshotFrom<M>, event: EventFromLogic<M>) => string,
  /** When the input is itself the history's first event: its type, and events count from 1. */
  inputEvent?: { type: string },
): SnapshotFrom<M> {
  const firstIndex = inputEvent ? 1 : 0;
  const actor = createActor(machine, { input });
  // An observer keeps xstate from rethrowing an error asynchronously; `check` throws it here.
  actor.subscribe({ error: () => {} });
  const check = (i: number, type: string) => {
    const snapshot = actor.getSnapshot() as AnyMachineSnapshot;
    if (snapshot.status === 'error') throw new Error(`event ${i} (${type}) could not be applied: ${String(snapshot.error)}`);
  };
  try {
    actor.start();
    check(0, inputEvent?.type ?? 'start');
    events.forEach((event, k) => {
      const i = firstIndex + k;
      const snapshot = actor.getSnapshot() as AnyMachineSnapshot;
      if (!snapshot.can(event)) {
        throw new Error(`event ${i} (${event.type}) refused in state ${String(snapshot.value)}: ${explain(snapshot as SnapshotFrom<M>, event)}`);
      }
      actor.send(event);
      check(i, event.type);
    });
    return actor.getSnapshot() as SnapshotFrom<M>;
  } finally {
    actor.stop();
  }
}
