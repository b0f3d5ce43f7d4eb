// What the executor needs to know to schedule, folded from the events it follows: which
// executions wait for a worker (in priority, then FIFO order), which are handed off but not
// yet started, and how many executions each worker holds. Pure: events in, state out.
//
// The executor rebuilds this from the event store when it starts and keeps it current from
// its subscription. Every executor holds its own copy; compare-and-swap appends settle races
// between them.
import type { StoredEvent } from '../eventstore/event-store.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';

export interface WaitingExecution {
  executionId: string;
  action: string;
  priority: number;
  /** Global order of arrival, for FIFO within a priority. */
  seq: number;
  /** Earliest time a retry may be scheduled (ms since epoch); 0 when none. */
  notBefore: number;
}

export interface HandedOffExecution {
  executionId: string;
  workerId: string;
  action: string;
  attempt: number;
  handoffEventId: string;
  handoffRevision: bigint;
  handedOffAt: number;
}

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
}

/** An execution whose baton came back: the executor must schedule a retry or abandon it. */
export interface RetryDecision {
  executionId: string;
  action: string;
  attempt: number;
  maxAttempts: number;
  reason: string;
}

export class SchedulingIndex {
  readonly #executions = new Map<string, Tracked>();
  readonly #waiting = new Map<string, WaitingExecution>();
  readonly #handedOff = new Map<string, HandedOffExecution>();
  readonly #retryPending = new Map<string, RetryDecision>();
  readonly #load = new Map<string, number>();
  #seq = 0;

  /**
   * Apply one stored event. Returns whether it may let something be scheduled, and the terminal
   * status it led to, if any.
   */
  apply(event: StoredEvent): { unblocks: boolean; terminal: string | null } {
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
        });
        return false;
      }
      case 'ExecutionStarted':
        if (tracked) tracked.phase = 'running';
        this.#handedOff.delete(id);
        return false;
      case 'OwnershipReclaimed':
      case 'OwnershipReleased':
        this.#release(id, tracked, 'retry-pending', `${event.type === 'OwnershipReclaimed' ? 'reclaimed' : 'released'}: ${String(data.reason)}`);
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

  #wait(id: string, t: Tracked, notBefore: number): void {
    this.#waiting.set(id, { executionId: id, action: t.action, priority: t.priority, seq: this.#seq++, notBefore });
  }

  #release(id: string, tracked: Tracked | undefined, phase: Phase, reason?: string): void {
    this.#waiting.delete(id);
    this.#handedOff.delete(id);
    if (!tracked) return;
    if (phase === 'retry-pending') {
      this.#retryPending.set(id, { executionId: id, action: tracked.action, attempt: tracked.attempt, maxAttempts: tracked.maxAttempts, reason: reason ?? 'returned' });
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

  /** Drop a waiting entry this executor found it cannot schedule (another executor took it). */
  forget(executionId: string): void {
    this.#waiting.delete(executionId);
  }
}
