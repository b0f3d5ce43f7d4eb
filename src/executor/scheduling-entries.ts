// What the scheduling view hands out: the executions in each phase the executor acts on, the
// decisions it owes, and the reason words it writes into the history for a reclaim; and the
// phase of each execution state.
import type { ExecutionStatus } from '../../actors/execution.machine.ts';

/** What the executor does with an execution in each non-final state. */
export type Phase = 'waiting' | 'retry-pending' | 'scheduling' | 'handed-off' | 'running';

export function phaseOf(status: ExecutionStatus, retryPending: boolean): Phase | undefined {
  switch (status) {
    case 'Requested':
      return retryPending ? 'retry-pending' : 'waiting';
    case 'Scheduling':
      return 'scheduling';
    case 'Scheduled':
      return 'handed-off';
    case 'Running':
      return 'running';
    case 'Completed':
    case 'Failed':
    case 'Cancelled':
    case 'TimedOut':
    case 'Abandoned':
      return undefined;
    default: {
      const unknown: never = status;
      throw new Error(`no phase for execution state ${String(unknown)}`);
    }
  }
}

/** Phases in which the execution holds its concurrency slot. */
export const HOLDS_SLOT: ReadonlySet<Phase> = new Set(['scheduling', 'handed-off', 'running']);


export interface HandedOffExecution {
  executionId: string;
  workerId: string;
  action: string;
  attempt: number;
  handoffEventId: string;
  handoffRevision: bigint;
  handedOffAt: number;
  /** The schedule-to-start deadline (ms since epoch). */
  deadline: number;
}

export interface RunningExecution {
  executionId: string;
  workerId: string;
  attempt: number;
  /** The recorded start-to-close deadline, as written (the executor must name it exactly); null when none. */
  deadline: string | null;
}

export type WorkerStatus = 'active' | 'draining' | 'stopped' | 'lost';
export interface ActionGauges {
  waiting: number;
  atLimit: number;
  held: number;
  limit: number | undefined;
}

/** An execution whose baton came back: the executor must schedule a retry or abandon it. */
export interface RetryDecision {
  executionId: string;
  action: string;
  attempt: number;
  maxAttempts: number;
  /** maxAttempts was recorded by a SchedulingStarted or a handoff (else it is the request's, from before machine version 4). */
  limitRecorded: boolean;
  reason: string;
  /** A cancel was requested while a worker held it: end it as Cancelled, never retry. */
  cancelRequested?: string;
}

/**
 * An execution a previous process of a worker id still held when a new process announced itself
 * under that id (WorkerStarted): that process is gone, so the executor reclaims at once instead of
 * waiting for its heartbeat to go stale or its message's ack-wait to pass.
 */
export interface Orphan {
  executionId: string;
  workerId: string;
  attempt: number;
}

/** An execution a worker holds that someone asked to cancel: the worker must be told. */
export interface CancelRequest {
  executionId: string;
  workerId: string;
  attempt: number;
  reason: string;
}

/** Why a reclaim happened, in words for the history (ExecutionRetryScheduled / ExecutionAbandoned reason). */
export function reclaimReason(reason: string, workerId: string, attempt: number): string {
  switch (reason) {
    case 'schedule-to-start':
      return `reclaimed: worker ${workerId} did not start attempt ${attempt} before its schedule-to-start deadline`;
    case 'worker-lost':
      return `reclaimed: worker ${workerId} stopped sending heartbeats during attempt ${attempt}`;
    case 'worker-restarted':
      return `reclaimed: worker ${workerId} restarted while it held attempt ${attempt} (its previous process ended without handing it back)`;
    case 'drain':
      return `reclaimed: worker ${workerId} had stopped (drained) when attempt ${attempt} was handed to it, and did not come back`;
    default:
      return `reclaimed from worker ${workerId} (${reason}) during attempt ${attempt}`;
  }
}
