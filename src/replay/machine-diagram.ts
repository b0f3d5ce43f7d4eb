// The execution machine's states and transitions as data, read from the definition, for
// drawing the statechart (the /ui timeline marks the path a history took on it).
import type { AnyStateMachine } from 'xstate';

export interface MachineDiagram {
  version: string;
  initial: string;
  states: { name: string; final: boolean }[];
  /** One per (from, event, to); an event with guarded branches to several targets gives several. */
  transitions: { from: string; to: string; event: string }[];
}

export function machineDiagram(machine: AnyStateMachine, version: string): MachineDiagram {
  const nodes = Object.entries(machine.root.states);
  const transitions = nodes.flatMap(([from, node]) =>
    [...node.transitions.entries()].flatMap(([event, branches]) => {
      // A transition without a target stays in its state (ExecutionProgressed in Running).
      const targets = new Set(branches.flatMap((b) => (b.target?.length ? b.target.map((t) => t.key) : [from])));
      return [...targets].map((to) => ({ from, to, event }));
    }),
  );
  return {
    version,
    initial: String(machine.root.initial?.target[0]?.key ?? nodes[0]?.[0]),
    states: nodes.map(([name, node]) => ({ name, final: node.type === 'final' })),
    transitions,
  };
}
