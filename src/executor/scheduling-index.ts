// What the executor needs to know to schedule and to enforce deadlines, folded from the events
// it follows: which executions wait for a worker (in priority, then FIFO order), which are
// handed off but not yet started (with their schedule-to-start deadline), which run where
// (with their start-to-close deadline), how many executions each worker holds, each worker's
// lifecycle status, and the policies workers advertise per action. Pure: events in, state out.
//
// The executor rebuilds this from the event store when it starts and keeps it current from
// its subscription. Every executor holds its own copy; compare-and-swap appends settle races
// between them.
import type { StoredEvent } from '../eventstore/event-store.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { workerIdOfStream, type ActionPolicy } from '../../schemas/worker-events.ts';

export interface WaitingExecution {
  executionId: string;
  action: string;
  priority: number;
  /** Global order of arrival, for FIFO within a priority. */
  seq: number;
  /** Earliest time a retry may be scheduled (ms since epoch); 0 when none. */
  notBefore: number;
  /** Workers that let an earlier attempt pass its schedule-to-start deadline: try others first. */
  avoid: readonly string[];
}

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
const WORKER_STATUS: Record<string, WorkerStatus> = {
  WorkerStarted: 'active',
  WorkerDraining: 'draining',
  WorkerStopped: 'stopped',
  WorkerLost: 'lost',
};

const TERMINAL_STATUS: Record<string, string> = {
  ExecutionCompleted: 'Completed',
  ExecutionFailed: 'Failed',
  ExecutionCancelled: 'Cancelled',
  ExecutionTimedOut: 'TimedOut',
  ExecutionAbandoned: 'Abandoned',
};

type Phase = 'waiting' | 'scheduling' | 'handed-off' | 'running' | 'retry-pending' | 'done';

interface Tracked {
  action: string;
  priority: number;
  phase: Phase;
  workerId: string | null;
  attempt: number;
  maxAttempts: number;
  avoid: Set<string>;
  /** Arrival order, kept across retries: a retried execution keeps its place in line. */
  seq: number;
  /** The reason of an ExecutionCancelRequested: ring the holder; if the baton comes back, cancel. */
  cancelRequested?: string;
}

/** An execution whose baton came back: the executor must schedule a retry or abandon it. */
export interface RetryDecision {
  executionId: string;
  action: string;
  attempt: number;
  maxAttempts: number;
  reason: string;
  /** A cancel was requested while a worker held it: end it as Cancelled, never retry. */
  cancelRequested?: string;
}

/** An execution a worker holds that someone asked to cancel: the worker must be told. */
export interface CancelRequest {
  executionId: string;
  workerId: string;
  attempt: number;
  reason: string;
}

/** Why a reclaim happened, in words for the history (ExecutionRetryScheduled / ExecutionAbandoned reason). */
function reclaimReason(reason: string, workerId: string, attempt: number): string {
  switch (reason) {
    case 'schedule-to-start':
      return `reclaimed: worker ${workerId} did not start attempt ${attempt} before its schedule-to-start deadline`;
    case 'worker-lost':
      return `reclaimed: worker ${workerId} stopped sending heartbeats during attempt ${attempt}`;
    default:
      return `reclaimed from worker ${workerId} (${reason}) during attempt ${attempt}`;
  }
}

export class SchedulingIndex {
  readonly #executions = new Map<string, Tracked>();
  readonly #waiting = new Map<string, WaitingExecution>();
  readonly #handedOff = new Map<string, HandedOffExecution>();
  readonly #retryPending = new Map<string, RetryDecision>();
  readonly #running = new Map<string, RunningExecution>();
  readonly #load = new Map<string, number>();
  readonly #workers = new Map<string, WorkerStatus>();
  readonly #policies = new Map<string, ActionPolicy>();
  #seq = 0;

  /**
   * Apply one stored event. Returns whether it may let something be scheduled, and the terminal
   * status it led to, if any.
   */
  apply(event: StoredEvent): { unblocks: boolean; terminal: string | null } {
    const workerId = workerIdOfStream(event.streamId);
    if (workerId !== undefined) return { unblocks: this.#applyWorker(workerId, event), terminal: null };
    if (!event.streamId.startsWith(EXECUTION_STREAM_PREFIX)) return { unblocks: false, terminal: null };
    const id = event.streamId.slice(EXECUTION_STREAM_PREFIX.length);
    const before = this.#executions.has(id);
    const unblocks = this.#apply(id, event);
    const terminal = before && !this.#executions.has(id) ? TERMINAL_STATUS[event.type] ?? null : null;
    return { unblocks, terminal };
  }

  #apply(id: string, event: StoredEvent): boolean {
    const data = event.data as Record<string, unknown>;
    const tracked = this.#executions.get(id);
    switch (event.type) {
      case 'ExecutionRequested': {
        const t: Tracked = {
          action: String(data.action),
          priority: Number(data.priority ?? 0),
          phase: 'waiting',
          workerId: null,
          attempt: 1,
          maxAttempts: Number(data.maxAttempts ?? 1),
          avoid: new Set(),
          seq: this.#seq++,
        };
        this.#executions.set(id, t);
        this.#wait(id, t, 0);
        return true;
      }
      case 'ExecutionRetryScheduled':
        if (!tracked) return false;
        this.#retryPending.delete(id);
        tracked.phase = 'waiting';
        tracked.attempt = Number(data.attempt);
        this.#wait(id, tracked, Date.parse(String(data.retryAt)));
        return true;
      case 'SchedulingStarted':
        if (tracked) tracked.phase = 'scheduling';
        this.#waiting.delete(id);
        return false;
      case 'ExecutionHandedOff': {
        if (!tracked) return false;
        const workerId = String(data.workerId);
        tracked.phase = 'handed-off';
        tracked.workerId = workerId;
        this.#load.set(workerId, (this.#load.get(workerId) ?? 0) + 1);
        this.#handedOff.set(id, {
          executionId: id,
          workerId,
          action: tracked.action,
          attempt: Number(data.attempt),
          handoffEventId: event.eventId,
          handoffRevision: event.revision,
          handedOffAt: event.recordedAt.getTime(),
          deadline: Date.parse(String(data.deadline)),
        });
        return false;
      }
      case 'ExecutionStarted':
        if (tracked) {
          tracked.phase = 'running';
          if (tracked.workerId) {
            const deadline = typeof data.deadline === 'string' ? data.deadline : null;
            this.#running.set(id, { executionId: id, workerId: tracked.workerId, attempt: Number(data.attempt), deadline });
          }
        }
        this.#handedOff.delete(id);
        return false;
      case 'ExecutionCancelRequested':
        if (tracked) tracked.cancelRequested = String(data.reason);
        return false;
      case 'OwnershipReclaimed':
        if (tracked && data.reason === 'schedule-to-start') tracked.avoid.add(String(data.workerId));
        this.#release(id, tracked, 'retry-pending', reclaimReason(String(data.reason), String(data.workerId), Number(data.attempt)));
        return true;
      case 'OwnershipReleased':
        this.#release(id, tracked, 'retry-pending', `released: ${String(data.reason)}`);
        return true;
      case 'ExecutionFailed': {
        // Mirrors the machine: a retryable failure with attempts left returns the baton.
        const retry = tracked !== undefined && data.retryable === true && tracked.attempt < tracked.maxAttempts;
        const message = String((data.error as { message?: unknown } | undefined)?.message ?? 'failed');
        this.#release(id, tracked, retry ? 'retry-pending' : 'done', `attempt ${tracked?.attempt} failed: ${message}`);
        if (!retry) this.#executions.delete(id);
        return true;
      }
      case 'ExecutionCompleted':
      case 'ExecutionCancelled':
      case 'ExecutionTimedOut':
      case 'ExecutionAbandoned':
        this.#release(id, tracked, 'done');
        this.#retryPending.delete(id);
        this.#executions.delete(id);
        return true;
      default:
        return false;
    }
  }

  #applyWorker(workerId: string, event: StoredEvent): boolean {
    const status = WORKER_STATUS[event.type];
    if (!status) return false;
    this.#workers.set(workerId, status);
    if (event.type === 'WorkerStarted') {
      const policies = (event.data as { policies?: Record<string, ActionPolicy> }).policies ?? {};
      for (const [action, policy] of Object.entries(policies)) this.#policies.set(action, policy);
    }
    return true; // a worker came, went or changed: scheduling may change
  }

  #wait(id: string, t: Tracked, notBefore: number): void {
    this.#waiting.set(id, { executionId: id, action: t.action, priority: t.priority, seq: t.seq, notBefore, avoid: [...t.avoid] });
  }

  #release(id: string, tracked: Tracked | undefined, phase: Phase, reason?: string): void {
    this.#waiting.delete(id);
    this.#handedOff.delete(id);
    this.#running.delete(id);
    if (!tracked) return;
    if (phase === 'retry-pending') {
      this.#retryPending.set(id, {
        executionId: id,
        action: tracked.action,
        attempt: tracked.attempt,
        maxAttempts: tracked.maxAttempts,
        reason: reason ?? 'returned',
        ...(tracked.cancelRequested !== undefined && { cancelRequested: tracked.cancelRequested }),
      });
    }
    if (tracked.workerId) {
      const n = (this.#load.get(tracked.workerId) ?? 1) - 1;
      if (n > 0) this.#load.set(tracked.workerId, n);
      else this.#load.delete(tracked.workerId);
    }
    tracked.workerId = null;
    tracked.phase = phase;
  }

  /** Executions ready to schedule at `now`, highest priority first, then oldest first. */
  ready(now: number): WaitingExecution[] {
    return [...this.#waiting.values()].filter((w) => w.notBefore <= now).sort((a, b) => b.priority - a.priority || a.seq - b.seq);
  }

  /** The earliest future notBefore among waiting retries, if any. */
  nextRetryAt(now: number): number | undefined {
    let next: number | undefined;
    for (const w of this.#waiting.values()) if (w.notBefore > now && (next === undefined || w.notBefore < next)) next = w.notBefore;
    return next;
  }

  /** Executions this index believes a worker holds. */
  loadOf(workerId: string): number {
    return this.#load.get(workerId) ?? 0;
  }

  retryPending(): RetryDecision[] {
    return [...this.#retryPending.values()];
  }

  /** Forget a decision this executor could not append (another executor made it). */
  decided(executionId: string): void {
    this.#retryPending.delete(executionId);
  }

  handoffOf(executionId: string): HandedOffExecution | undefined {
    return this.#handedOff.get(executionId);
  }

  handedOff(): HandedOffExecution[] {
    return [...this.#handedOff.values()];
  }

  waitingCount(): number {
    return this.#waiting.size;
  }

  /** Handoffs whose schedule-to-start deadline passed before the worker started. */
  expiredHandoffs(now: number): HandedOffExecution[] {
    return [...this.#handedOff.values()].filter((h) => h.deadline <= now);
  }

  /** Runs whose recorded start-to-close deadline is more than `graceMs` past. */
  overdueRuns(now: number, graceMs: number): RunningExecution[] {
    return [...this.#running.values()].filter((r) => r.deadline !== null && Date.parse(r.deadline) + graceMs <= now);
  }

  /** What a worker holds: handed off to it, or running on it. */
  heldBy(workerId: string): { executionId: string; attempt: number }[] {
    const held = [...this.#handedOff.values(), ...this.#running.values()].filter((x) => x.workerId === workerId);
    return held.map((x) => ({ executionId: x.executionId, attempt: x.attempt }));
  }

  /** Executions a worker holds (handed off or running) with a cancel request on them. */
  cancelRequestsHeld(): CancelRequest[] {
    const requests: CancelRequest[] = [];
    for (const held of [...this.#handedOff.values(), ...this.#running.values()]) {
      const reason = this.#executions.get(held.executionId)?.cancelRequested;
      if (reason !== undefined) requests.push({ executionId: held.executionId, workerId: held.workerId, attempt: held.attempt, reason });
    }
    return requests;
  }

  /** The worker's lifecycle status from its stream; undefined before its first event. */
  workerStatus(workerId: string): WorkerStatus | undefined {
    return this.#workers.get(workerId);
  }

  /** The latest policy a worker advertised for the action, if any. */
  policyOf(action: string): ActionPolicy | undefined {
    return this.#policies.get(action);
  }

  /** Drop a waiting entry this executor found it cannot schedule (another executor took it). */
  forget(executionId: string): void {
    this.#waiting.delete(executionId);
  }
}
