// What the executor needs to know to schedule and to enforce deadlines, folded from the events
// it follows: which executions wait for a worker (in priority, then FIFO order), which are
// handed off but not yet started (with their schedule-to-start deadline), which run where
// (with their start-to-close deadline), how many executions each worker holds, each worker's
// lifecycle status, the policies workers advertise per action, and the concurrency slots each
// action (or key of it) holds. Pure: events in, state out.
//
// Concurrency slots: an execution takes one at SchedulingStarted and gives it back exactly once,
// at its final event or when the baton comes back to the executor (OwnershipReclaimed,
// OwnershipReleased, a retryable ExecutionFailed); its retry then queues again. `ready()` offers,
// per action (and per key of it, when the action's policy names a key), no more executions than
// there are free slots; a full bucket holds back only its own executions, never the others
// behind them. The executor that appended a SchedulingStarted tells the index at once
// (`scheduling()`), so its next pass counts the slot before the subscription brings the event.
//
// The executor rebuilds this from the event store when it starts and keeps it current from
// its subscription. Every executor holds its own copy; compare-and-swap appends settle races
// between them.
import type { StoredEvent } from '../eventstore/event-store.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { workerIdOfStream, type ActionPolicy } from '../../schemas/worker-events.ts';
import { AdvertisedWorkers } from './advertised-workers.ts';
import { SlotCounts, concurrencyKeyOf, slotBucket } from './concurrency-slots.ts';
import { WaitingQueue } from './waiting-queue.ts';
import {
  reclaimReason,
  type ActionGauges,
  type CancelRequest,
  type HandedOffExecution,
  type Orphan,
  type RetryDecision,
  type RunningExecution,
  type WaitingExecution,
  type WorkerStatus,
} from './scheduling-entries.ts';

export { concurrencyKeyOf, slotBucket } from './concurrency-slots.ts';
export type { ActionGauges, CancelRequest, HandedOffExecution, Orphan, RetryDecision, RunningExecution, WaitingExecution, WorkerStatus } from './scheduling-entries.ts';

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
  /** Mirrors the machine's context.maxAttempts (the request's, then what SchedulingStarted recorded). */
  maxAttempts: number;
  /** Whether a SchedulingStarted recorded a limit (machine version 4); before that the executor capped it itself. */
  limitRecorded: boolean;
  avoid: Set<string>;
  /** Arrival order, kept across retries: a retried execution keeps its place in line. */
  seq: number;
  /** The reason of an ExecutionCancelRequested: ring the holder; if the baton comes back, cancel. */
  cancelRequested?: string;
  /** Last revision of its stream applied here. */
  revision: bigint;
  /** Its concurrency bucket (slotBucket(action, key)). */
  bucket: string;
  /** Whether it holds a slot of `bucket` now. */
  holdsSlot: boolean;
  /**
   * The input, kept only while no worker has advertised the action yet: its concurrency key
   * cannot be computed before the policy is known. Dropped as soon as it is.
   */
  input?: unknown;
}

export class SchedulingIndex {
  readonly #executions = new Map<string, Tracked>();
  readonly #waiting = new WaitingQueue();
  readonly #handedOff = new Map<string, HandedOffExecution>();
  readonly #retryPending = new Map<string, RetryDecision>();
  readonly #running = new Map<string, RunningExecution>();
  readonly #load = new Map<string, number>();
  /** Worker statuses and the policies they advertise, from the worker streams. */
  readonly #advertised = new AdvertisedWorkers();
  /** Executions with a cancel request, so the monitor's ring looks at these and not at every held one. */
  readonly #cancelRequested = new Set<string>();
  /** Held by a previous process of their worker id, not reclaimed yet (see Orphan). */
  readonly #orphans = new Map<string, Orphan>();
  /** Executions of actions not advertised yet, per action: they keep their input until it is. */
  readonly #unkeyed = new Map<string, Set<string>>();
  /** Slots held per bucket, and per action (the sum over its buckets). */
  readonly #slots = new SlotCounts();
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
    if (tracked) tracked.revision = event.revision;
    switch (event.type) {
      case 'ExecutionRequested': {
        const action = String(data.action);
        // The key is computed once, from the policy known at this point of the global order
        // (or when the action's first policy arrives), so every executor (and a rebuild) derives
        // the same one. Keeping the whole input of every waiting execution until it is scheduled
        // would cost memory in proportion to the backlog's inputs; keeping it only while no
        // worker has advertised the action costs nothing in the usual case. The price: when a
        // later deployment changes an action's key path, executions already requested keep the
        // bucket they got (a limit change applies at once).
        const known = this.#advertised.knows(action);
        const t: Tracked = {
          action,
          priority: Number(data.priority ?? 0),
          phase: 'waiting',
          workerId: null,
          attempt: 1,
          maxAttempts: Number(data.maxAttempts ?? 1),
          limitRecorded: false,
          avoid: new Set(),
          seq: this.#seq++,
          revision: event.revision,
          bucket: slotBucket(action, known ? concurrencyKeyOf(this.#advertised.policyOf(action)?.concurrency?.key, data.input) : null),
          holdsSlot: false,
          ...(!known && { input: data.input }),
        };
        this.#executions.set(id, t);
        if (!known) {
          let set = this.#unkeyed.get(action);
          if (!set) this.#unkeyed.set(action, (set = new Set()));
          set.add(id);
        }
        this.#wait(id, t, 0, event.recordedAt.getTime());
        return true;
      }
      case 'ExecutionRetryScheduled':
        if (!tracked) return false;
        this.#retryPending.delete(id);
        tracked.phase = 'waiting';
        tracked.attempt = Number(data.attempt);
        this.#wait(id, tracked, Date.parse(String(data.retryAt)), event.recordedAt.getTime());
        return true;
      case 'SchedulingStarted':
        if (tracked && typeof data.maxAttempts === 'number') {
          tracked.maxAttempts = data.maxAttempts;
          tracked.limitRecorded = true;
        }
        this.#schedulingStarted(id, tracked);
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
        this.#orphans.delete(id); // started after the new process announced itself: its own
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
        if (tracked) {
          tracked.cancelRequested = String(data.reason);
          this.#cancelRequested.add(id);
        }
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
        if (!retry) this.#forgetExecution(id);
        return true;
      }
      case 'ExecutionCompleted':
      case 'ExecutionCancelled':
      case 'ExecutionTimedOut':
      case 'ExecutionAbandoned':
        this.#release(id, tracked, 'done');
        this.#retryPending.delete(id);
        this.#forgetExecution(id);
        return true;
      default:
        return false;
    }
  }

  #applyWorker(workerId: string, event: StoredEvent): boolean {
    const change = this.#advertised.apply(workerId, event);
    if (!change) return false;
    if (event.type === 'WorkerStarted' && change.before !== undefined) {
      // A new process under a known id: whatever the id still holds, the previous process held
      // (a clean stop holds nothing; a lost one's reclaims may not all have landed).
      for (const x of this.heldBy(workerId)) this.#orphans.set(x.executionId, { ...x, workerId, announcedAt: event.globalPosition });
    }
    for (const action of change.advertised) this.#keyWaitingInputs(action);
    return true; // a worker came, went or changed: scheduling may change
  }

  /** The action's policy is known now: compute the keys its executions could not get before. */
  #keyWaitingInputs(action: string): void {
    const ids = this.#unkeyed.get(action);
    if (!ids) return;
    this.#unkeyed.delete(action);
    const path = this.#advertised.policyOf(action)?.concurrency?.key;
    for (const id of ids) {
      const t = this.#executions.get(id);
      if (!t) continue;
      const bucket = slotBucket(action, concurrencyKeyOf(path, t.input));
      delete t.input;
      if (bucket === t.bucket) continue;
      const held = t.holdsSlot;
      if (held) this.#slots.free(t);
      t.bucket = bucket;
      if (held) this.#slots.take(t);
      this.#waiting.rebucket(id, bucket);
    }
  }

  /** It reached a final state: nothing about it is needed any more. */
  #forgetExecution(id: string): void {
    this.#executions.delete(id);
    this.#cancelRequested.delete(id);
  }

  #wait(id: string, t: Tracked, notBefore: number, at: number): void {
    this.#waiting.add({ executionId: id, action: t.action, priority: t.priority, seq: t.seq, notBefore, since: Math.max(at, notBefore), avoid: [...t.avoid], bucket: t.bucket });
  }

  #schedulingStarted(id: string, tracked: Tracked | undefined): void {
    this.#waiting.remove(id);
    if (!tracked) return;
    tracked.phase = 'scheduling';
    this.#slots.take(tracked);
  }

  #release(id: string, tracked: Tracked | undefined, phase: Phase, reason?: string): void {
    this.#waiting.remove(id);
    this.#handedOff.delete(id);
    this.#running.delete(id);
    this.#orphans.delete(id);
    if (!tracked) return;
    this.#slots.free(tracked);
    if (phase === 'done') {
      const unkeyed = this.#unkeyed.get(tracked.action);
      unkeyed?.delete(id);
      if (unkeyed?.size === 0) this.#unkeyed.delete(tracked.action);
    }
    if (phase === 'retry-pending') {
      this.#retryPending.set(id, {
        executionId: id,
        action: tracked.action,
        attempt: tracked.attempt,
        maxAttempts: tracked.maxAttempts,
        limitRecorded: tracked.limitRecorded,
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

  /** Executions ready to schedule at `now` (see WaitingQueue.ready). */
  ready(now: number): WaitingExecution[] {
    return this.#waiting.ready(now, (action, bucket) => this.freeSlots(action, bucket));
  }

  /** The action's concurrency limit (per key when its policy names one), or undefined when it has none. */
  concurrencyLimitOf(action: string): number | undefined {
    return this.#advertised.policyOf(action)?.concurrency?.limit;
  }

  /** Slots the bucket has free now (Infinity when the action has no limit); never negative. */
  freeSlots(action: string, bucket: string): number {
    const limit = this.concurrencyLimitOf(action);
    return limit === undefined ? Infinity : Math.max(0, limit - this.#slots.heldIn(bucket));
  }

  /**
   * Per action: executions waiting in Requested, of those the ones whose bucket is at its
   * limit, slots held (scheduled, handed off or running), and the limit. For metrics: O(waiting).
   */
  actionGauges(): Map<string, ActionGauges> {
    const out = new Map<string, ActionGauges>();
    const entry = (action: string) => {
      let e = out.get(action);
      if (!e) out.set(action, (e = { waiting: 0, atLimit: 0, held: 0, limit: this.concurrencyLimitOf(action) }));
      return e;
    };
    for (const w of this.#waiting.values()) {
      const e = entry(w.action);
      e.waiting++;
      if (this.freeSlots(w.action, w.bucket) === 0) e.atLimit++;
    }
    for (const [action, n] of this.#slots.byAction()) entry(action).held = n;
    for (const action of this.#advertised.limitedActions()) entry(action);
    return out;
  }

  /**
   * This executor appended the execution's SchedulingStarted at `revision`: take its slot now,
   * so the next pass counts it before the subscription brings the event back (which then
   * changes nothing). Does nothing when the index has already applied that revision.
   */
  scheduling(executionId: string, revision: bigint): void {
    const tracked = this.#executions.get(executionId);
    if (tracked && tracked.revision >= revision) return;
    this.#schedulingStarted(executionId, tracked);
  }

  /** The earliest future notBefore among waiting retries, if any. */
  nextRetryAt(now: number): number | undefined {
    return this.#waiting.nextRetryAt(now);
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

  /** The actions some execution waits for, and how many wait for each. */
  waitingActions(): Map<string, number> {
    return this.#waiting.actions();
  }

  /** The executions waiting for one action. */
  waitingFor(action: string): WaitingExecution[] {
    return this.#waiting.of(action);
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

  /** Orphans not reclaimed yet; each is handed out once (the executor's reclaim is a compare-and-swap). */
  takeOrphans(): Orphan[] {
    const orphans = [...this.#orphans.values()];
    this.#orphans.clear();
    return orphans;
  }

  /** Executions a worker holds (handed off or running) with a cancel request on them. */
  cancelRequestsHeld(): CancelRequest[] {
    const requests: CancelRequest[] = [];
    for (const id of this.#cancelRequested) {
      const held = this.#handedOff.get(id) ?? this.#running.get(id);
      const reason = this.#executions.get(id)?.cancelRequested;
      if (held && reason !== undefined) requests.push({ executionId: id, workerId: held.workerId, attempt: held.attempt, reason });
    }
    return requests;
  }

  /** The worker's lifecycle status from its stream; undefined before its first event. */
  workerStatus(workerId: string): WorkerStatus | undefined {
    return this.#advertised.status(workerId);
  }

  /** The latest policy a worker advertised for the action, if any. */
  policyOf(action: string): ActionPolicy | undefined {
    return this.#advertised.policyOf(action);
  }

  /** Drop a waiting entry this executor found it cannot schedule (another executor took it). */
  forget(executionId: string): void {
    this.#waiting.remove(executionId);
  }
}
