// The execution's state as the executor decided the handoff on, carried in the work message so a
// worker in another process starts the run without reading and folding the stream the executor
// just wrote (one query and a fold per delivery, on the pickup path). It is safe to trust only
// because the worker's ExecutionStarted is appended at the handoff's revision: the snapshot is
// exactly the stream's state there, or the append conflicts and the worker reads the store.
// Large inputs are not carried (the worker reads them): a work message stays small.
import { MACHINE_VERSION, executionMachine, executionStatuses, type ExecutionContext, type ExecutionSnapshot } from '../../actors/execution.machine.ts';

export interface CarriedExecution {
  machineVersion: string;
  value: string;
  context: Record<string, unknown>;
}

/**
 * Largest carried state (JSON characters). A work message is a row of the Postgres queue and a
 * JetStream message (1 MiB max by default); 32 KiB keeps both small while every input a job
 * queue typically carries (ids, a few fields) travels with its work.
 */
export const MAX_CARRIED_CHARS = 32 * 1024;

/** The state to carry, or undefined when it is too large to be worth carrying. */
export function carryExecution(snapshot: ExecutionSnapshot): CarriedExecution | undefined {
  const carried: CarriedExecution = { machineVersion: MACHINE_VERSION, value: String(snapshot.value), context: snapshot.context as unknown as Record<string, unknown> };
  return JSON.stringify(carried).length <= MAX_CARRIED_CHARS ? carried : undefined;
}

/** The snapshot a carried state stands for; undefined when it was made by other rules (another machine version) or is not an execution's state. */
export function restoreExecution(carried: CarriedExecution | undefined): ExecutionSnapshot | undefined {
  if (carried === undefined || carried.machineVersion !== MACHINE_VERSION) return undefined;
  if (!(executionStatuses as readonly string[]).includes(carried.value)) return undefined;
  const c = carried.context as Partial<ExecutionContext>;
  if (typeof c.action !== 'string' || typeof c.owner !== 'string' || typeof c.attempt !== 'number' || typeof c.requestedAt !== 'string') return undefined;
  return executionMachine.resolveState({ value: carried.value as ExecutionSnapshot['value'], context: carried.context as unknown as ExecutionContext }) as ExecutionSnapshot;
}
