// Pure steps through a machine, for deciding and folding. xstate's own pure functions,
// `initialTransition(machine, input)` and `transition(machine, snapshot, event)`, build a
// throwaway actor on every call (createInertActorScope), and that actor's constructor runs the
// machine's context factory with no input. Profiled in `baton bench`, that was 11.6% of all CPU
// (the factory destructuring `undefined`, and xstate swallowing the TypeError) and ~25 µs a
// step. A stepper builds that scope once per machine, from a real input, and hands it to the
// machine's own `getInitialSnapshot` / `transition` (public ActorLogic methods): the same
// microsteps, the same snapshots, ~3 µs a step in a micro-benchmark, ~15 µs in `baton bench`. Like
// xstate's, its scope executes no actions (our machines only `assign`, which xstate applies inside
// the transition itself). A flat machine (all of ours) steps without xstate's macrostep at all
// (flat-steps.ts), on the same definition.
import { createActor, type ActorScope, type AnyMachineSnapshot, type AnyStateMachine, type EventFromLogic, type EventObject, type InputFrom, type SnapshotFrom } from 'xstate';
import { flatSteps } from './flat-steps.ts';

export interface Stepper<M extends AnyStateMachine> {
  /** The snapshot a new actor of `machine` starts in, for `input`. */
  initial(input: InputFrom<M>): SnapshotFrom<M>;
  /** The snapshot after `event`; `snapshot` itself when no transition takes it (ask `snapshot.can(event)` first). */
  next(snapshot: SnapshotFrom<M>, event: EventFromLogic<M>): SnapshotFrom<M>;
  /** Whether steps go through flat-steps.ts (the machine is flat) rather than xstate's macrostep. */
  readonly flat: boolean;
  /** The snapshot as plain JSON (xstate's persisted form), for a snapshot store. */
  persist(snapshot: SnapshotFrom<M>): unknown;
  /** A snapshot back from `persist`'s JSON, through the machine's own restoreSnapshot. */
  restore(persisted: unknown): SnapshotFrom<M>;
}

/**
 * A stepper for `machine`. `sampleInput` is any input the machine accepts: it only builds the
 * one inert actor the scope names as `self` (never started, never sent anything).
 */
export function stepperOf<M extends AnyStateMachine>(machine: M, sampleInput: InputFrom<M>): Stepper<M> {
  const self = createActor(machine, { input: sampleInput });
  const scope: ActorScope<SnapshotFrom<M>, EventFromLogic<M>> = {
    self,
    id: '',
    sessionId: '',
    logger: () => {},
    defer: () => {},
    emit: () => {},
    system: self.system,
    stopChild: () => {},
    actionExecutor: () => {},
  };
  const flat = flatSteps(machine, scope as unknown as ActorScope<AnyMachineSnapshot, EventObject>);
  return {
    flat: flat !== undefined,
    initial: (input) => (flat ? flat.initial(input) : machine.getInitialSnapshot(scope, input)) as SnapshotFrom<M>,
    // xstate selects by the snapshot's own machine; one made by another (an older version carried
    // over) and xstate's internal events take xstate's own step.
    next: (snapshot, event) =>
      (flat && (snapshot as AnyMachineSnapshot).machine === machine && !event.type.startsWith('xstate.')
        ? flat.next(snapshot as AnyMachineSnapshot, event)
        : machine.transition(snapshot, event, scope)) as SnapshotFrom<M>,
    persist: (snapshot) => machine.getPersistedSnapshot(snapshot),
    restore: (persisted) => machine.restoreSnapshot(persisted as Parameters<M['restoreSnapshot']>[0], scope) as SnapshotFrom<M>,
  };
}
