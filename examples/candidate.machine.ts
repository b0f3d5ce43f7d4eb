// A candidate execution machine for the deploy gate (README, "Replay and time-travel"): today's
// machine with one edit a developer might make, here dropping progress reports while Running.
// Check it against the live store before deploying it:
//
//   npx baton replay --in-flight --against ./examples/candidate.machine.ts
//
// Every execution Running now would be stranded (its worker's next `ctx.heartbeat(details)`
// would be refused), so the gate lists them and exits 1. A candidate is any module exporting
// the machine as `executionMachine` (MACHINE_VERSION, optional, labels the output).
import { createMachine, type AnyStateMachine } from 'xstate';
import { executionMachine as current } from '../actors/execution.machine.ts';

type StateConfig = { on?: Record<string, unknown> };
const config = current.config as unknown as { states: Record<string, StateConfig> };
const { ExecutionProgressed: _dropped, ...runningOn } = config.states.Running!.on!;

export const MACHINE_VERSION = '4-candidate';
export const executionMachine: AnyStateMachine = createMachine(
  { ...(config as object), states: { ...config.states, Running: { ...config.states.Running, on: runningOn } } } as never,
  current.implementations as never,
) as unknown as AnyStateMachine;
