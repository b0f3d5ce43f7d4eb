// Executions as the actor runtime sees them: streams `execution-<id>`, the execution machine's
// decisions, and its refusals as NotOwnerError / AlreadyFinalError / InvalidTransitionError.
import { MACHINE_VERSION, decideExecution, foldExecution, isFinal, persistExecution, restoreExecution, startExecution, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import { EXECUTION_STREAM_PREFIX, ExecutionEvent, executionIdOfStream, executionStreamId } from '../../schemas/events.ts';
import { AlreadyFinalError, InvalidTransitionError, NotOwnerError, parseOrThrow } from '../errors.ts';
import { asExecutionEvent } from '../replay/history.ts';
import type { ActorKind, Decision } from './actor-kind.ts';

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
