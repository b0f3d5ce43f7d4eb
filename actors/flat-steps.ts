// Steps through a flat machine without xstate's macrostep. Our machines are flat: atomic and final
// states under the root, transitions that only `assign`, no entry/exit actions, eventless or delayed
// transitions, invocations, history or output. For such a machine a step is: the transition xstate
// selects (`machine.getTransitionData`, xstate's own guard evaluation, public API), its assigns
// applied to the context as xstate applies them, and the target state's snapshot. xstate's
// macrostep does the same through its general algorithm (exit and entry sets, transition domains,
// an eventless-transition pass, three snapshot copies): ~15 µs a step and ~15 µs an initial
// snapshot here, and 12% of all CPU of `baton bench` (hosts and projector, each folding every
// execution once). This takes ~1 µs. The rules stay the machine's, read from its definition:
// nothing here knows an event type, a guard or a state name. A machine with anything else gets
// xstate's own steps (flatSteps returns undefined), and test/unit/flat-steps.test.ts checks both
// give the same snapshots on every generated path, refusals included.
import type { ActorScope, AnyMachineSnapshot, AnyStateMachine, EventObject } from 'xstate';

export interface FlatSteps {
  initial(input: unknown): AnyMachineSnapshot;
  /** The snapshot after `event`: the very snapshot given when no transition takes it, as xstate. */
  next(snapshot: AnyMachineSnapshot, event: EventObject): AnyMachineSnapshot;
}

type Assignment = ((args: AssignArgs, params: unknown) => Record<string, unknown>) | Record<string, unknown>;
interface AssignArgs {
  context: Record<string, unknown>;
  event: EventObject;
  spawn: () => never;
  self: unknown;
  system: unknown;
}
interface StateNodeLike {
  key: string;
  type: string;
  states: Record<string, StateNodeLike>;
  entry: unknown[];
  exit: unknown[];
  always?: unknown[];
  history: unknown;
  output: unknown;
  invoke: unknown[];
  config: { after?: unknown };
  transitions: Map<string, { actions: unknown[]; target?: readonly StateNodeLike[] }[]>;
}

const noSpawn = (): never => {
  throw new Error('spawn is not available in a flat machine step (actors/flat-steps.ts)');
};

interface Assign {
  assignment: Assignment;
  /** The action's params, as xstate resolves them (a named action may give them, or a function of context and event). */
  params(context: Record<string, unknown>, event: EventObject): unknown;
}

/** An action the transition names, when it is a plain assign (named, with or without params, or inline); else undefined. */
function assignOf(machine: AnyStateMachine, action: unknown): Assign | undefined {
  const named = typeof action === 'string' ? action : typeof action === 'object' && action !== null ? (action as { type: string }).type : undefined;
  const resolved = named === undefined ? action : (machine.implementations.actions as Record<string, unknown>)[named];
  if (typeof resolved !== 'function') return undefined;
  const a = resolved as unknown as { type?: unknown; assignment?: unknown };
  if (a.type !== 'xstate.assign' || a.assignment === undefined) return undefined;
  const given = typeof action === 'object' && action !== null && 'params' in action ? (action as { params: unknown }).params : undefined;
  const params = typeof given === 'function' ? (context: Record<string, unknown>, event: EventObject) => given({ context, event }) : () => given;
  return { assignment: a.assignment as Assignment, params };
}

function isPlain(node: StateNodeLike): boolean {
  return node.entry.length === 0 && node.exit.length === 0 && !node.always?.length && node.config.after === undefined && node.invoke.length === 0 && !node.history && node.output === undefined;
}

/** Steps for `machine` when it is flat (see above), else undefined. `scope` is the stepper's inert scope. */
export function flatSteps(machine: AnyStateMachine, scope: ActorScope<AnyMachineSnapshot, EventObject>): FlatSteps | undefined {
  const root = machine.root as unknown as StateNodeLike;
  const factory = machine.config.context;
  if (root.type !== 'compound' || !isPlain(root) || root.transitions.size > 0) return undefined;
  const assigns = new Map<unknown, Assign>();
  for (const node of Object.values(root.states)) {
    if ((node.type !== 'atomic' && node.type !== 'final') || !isPlain(node)) return undefined;
    if (node.type === 'final' && node.transitions.size > 0) return undefined;
    for (const [descriptor, transitions] of node.transitions) {
      // Wildcards match more than one type: xstate still selects, but keep to what was checked.
      if (descriptor.includes('*') || descriptor.startsWith('xstate.')) return undefined;
      for (const t of transitions) {
        if (t.target && (t.target.length !== 1 || t.target[0]!.type === 'compound' || root.states[t.target[0]!.key] !== t.target[0])) return undefined;
        for (const action of t.actions) {
          const assign = assignOf(machine, action);
          if (!assign) return undefined;
          assigns.set(action, assign);
        }
      }
    }
  }
  // Each state's snapshot as xstate makes it (status 'done' in a final state), with an empty
  // context: a step copies it with the new context.
  const shapes = new Map(Object.keys(root.states).map((key) => [key, machine.resolveState({ value: key, context: {} }) as AnyMachineSnapshot]));
  const initialKey = (machine.root as unknown as { initial?: { target?: readonly StateNodeLike[] } }).initial?.target?.[0]?.key;
  if (initialKey === undefined || !shapes.has(initialKey)) return undefined;
  const enter = (key: string, context: unknown) => {
    const shape = shapes.get(key)!;
    // Fresh children and history per snapshot, as xstate's own are never shared between actors.
    return { ...shape, context, children: {}, historyValue: {} } as AnyMachineSnapshot;
  };

  return {
    initial(input) {
      try {
        // As xstate: a context factory is called with the input, a context object is taken as it is.
        const context = typeof factory === 'function' ? (factory as (args: { input: unknown; self: unknown; spawn: () => never }) => unknown)({ input, self: scope.self, spawn: noSpawn }) : factory;
        return enter(initialKey, context);
      } catch {
        // xstate answers a failing start with a snapshot in status 'error': its own, made again.
        return machine.getInitialSnapshot(scope, input) as AnyMachineSnapshot;
      }
    },
    next(snapshot, event) {
      if (snapshot.status !== 'active') return snapshot;
      const [t] = machine.getTransitionData(snapshot, event) as unknown as { actions: readonly unknown[]; target?: readonly StateNodeLike[] }[];
      if (t === undefined) return snapshot;
      let context = snapshot.context as Record<string, unknown>;
      for (const action of t.actions) {
        const { assignment, params: paramsOf } = assigns.get(action)!;
        const params = paramsOf(context, event);
        const args: AssignArgs = { context, event, spawn: noSpawn, self: scope.self, system: scope.system };
        let update: Record<string, unknown>;
        if (typeof assignment === 'function') {
          update = assignment(args, params);
        } else {
          update = {};
          for (const key of Object.keys(assignment)) {
            const value = assignment[key];
            update[key] = typeof value === 'function' ? (value as (a: AssignArgs, p: unknown) => unknown)(args, params) : value;
          }
        }
        context = { ...context, ...update }; // as xstate's Object.assign({}, context, update), ~7× faster here
      }
      const target = t.target?.[0]?.key;
      if (target === undefined || target === snapshot.value) {
        // No state change: xstate copies the snapshot only when an assign ran.
        return context === snapshot.context ? snapshot : ({ ...snapshot, context } as AnyMachineSnapshot);
      }
      // One copy of the target's shape (enter() would make fresh children and history to replace).
      return { ...shapes.get(target)!, context, children: snapshot.children, historyValue: snapshot.historyValue } as AnyMachineSnapshot;
    },
  };
}
