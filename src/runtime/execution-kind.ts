// Executions as the actor runtime sees them: streams `execution-<id>`, the execution machine's
// decisions, and its refusals as NotOwnerError / AlreadyFinalError / InvalidTransitionError.
import { MACHINE_VERSION, decideExecution, foldExecution, isFinal, persistExecution, restoreExecution, startExecution, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { EXECUTION_STREAM_PREFIX, ExecutionEvent, executionIdOfStream, executionStreamId } from '../../schemas/events.ts';
import { AlreadyFinalError, InvalidTransitionError, NotOwnerError, parseOrThrow } from '../errors.ts';
import { asExecutionEvent } from '../replay/history.ts';
import type { ActorKind, Command, Decision } from './actor-kind.ts';

function decide(id: string, before: ExecutionSnapshot | undefined, event: ExecutionEvent): Decision<ExecutionSnapshot> {
  if (before === undefined) {
    if (event.type === 'ExecutionRequested') return { ok: true, snapshot: startExecution(event) };
    return { ok: false, error: new InvalidTransitionError(id, event.type, '(none)', 'an execution starts with ExecutionRequested') };
  }
  const d = decideExecution(before, event);
  if (d.ok) return d;
  const Refusal = d.rejection === 'NotOwner' ? NotOwnerError : d.rejection === 'AlreadyFinal' ? AlreadyFinalError : InvalidTransitionError;
  return { ok: false, error: new Refusal(id, event.type, statusOf(before), d.reason) };
}

export const executionKind: ActorKind<ExecutionSnapshot, ExecutionEvent> = {
  name: 'execution',
  machineVersion: MACHINE_VERSION,
  streamPrefix: EXECUTION_STREAM_PREFIX,
  streamId: executionStreamId,
  idOf: executionIdOfStream,
  // Not validated again: every event was checked against the catalog when it was appended.
  read: asExecutionEvent,
  make: (c, occurredAt) =>
    parseOrThrow(
      ExecutionEvent,
      {
        type: c.type,
        data: c.data,
        metadata: {
          by: c.by,
          occurredAt,
          machineVersion: MACHINE_VERSION,
          ...(c.correlationId ? { correlationId: c.correlationId } : {}),
          ...(c.causationId ? { causationId: c.causationId } : {}),
          ...(c.traceparent ? { traceparent: c.traceparent, ...(c.tracestate && { tracestate: c.tracestate }) } : {}),
        },
      },
      `${c.type} event`,
    ),
  decide,
  fold(id, events) {
    try {
      // The machine's stepper fold (actors/stepper.ts): no actor per event.
      return foldExecution(events);
    } catch (err) {
      throw new InvalidTransitionError(id, '(stored history)', '?', `stream does not fold through machine version ${MACHINE_VERSION}: ${(err as Error).message}`, { cause: err });
    }
  },
  isFinal,
  // An execution's stream can be long (a run may report progress 100,000 times): loads fold
  // from a snapshot (actor-runtime.ts).
  persist: persistExecution,
  restore: restoreExecution,
};

/**
 * A made-up execution's whole run through `make` and `decide`, in memory, writing nothing: a host
 * calls it before its first execution. The first event of each type a process makes compiles that
 * type's validator (zod's fast path, generated on its first object) and runs the machine's
 * transitions cold: in a profile of a fresh worker's first pickup, ~1/3 of its 10–16 ms before the
 * handoff's append was that compile. Throws if the catalog refuses the path (a unit test runs it).
 */
export function warmUpExecutions(now: Date = new Date()): ExecutionSnapshot {
  const worker = 'warm-up-worker';
  const at = now.toISOString();
  const path: Command<ExecutionEvent>[] = [
    { type: 'ExecutionRequested', by: 'executor', data: { action: 'baton.warm-up', input: { warm: true }, maxAttempts: 2 } },
    { type: 'ExecutionHandedOff', by: 'executor', data: { workerId: worker, attempt: 1, deadline: at, maxAttempts: 2 } },
    { type: 'ExecutionStarted', by: `worker:${worker}`, data: { attempt: 1 } },
    { type: 'ExecutionProgressed', by: `worker:${worker}`, data: { details: { step: 1 } } },
    { type: 'ExecutionFailed', by: `worker:${worker}`, data: { error: { message: 'warm-up' }, retryable: true } },
    { type: 'ExecutionRetryScheduled', by: 'executor', data: { attempt: 2, retryAt: at, reason: 'warm-up' } },
    { type: 'ExecutionHandedOff', by: 'executor', data: { workerId: worker, attempt: 2, deadline: at } },
    { type: 'ExecutionStarted', by: `worker:${worker}`, data: { attempt: 2 } },
    { type: 'ExecutionCompleted', by: `worker:${worker}`, data: { result: { warm: true } } },
  ];
  let snapshot: ExecutionSnapshot | undefined;
  for (const command of path) {
    const d = decide('warm-up', snapshot, executionKind.make(command, at));
    if (!d.ok) throw d.error;
    snapshot = d.snapshot;
  }
  return snapshot!;
}
