// What the executor needs to know to schedule and to enforce deadlines, derived from the
// machine's snapshots: the actor runtime hands every change of every execution (this process's
// own appends and its subscription's events, each once) and the view reads the state the
// machine reached. Which executions wait, which must be retried or abandoned, which are handed
// off or running and where, which hold a concurrency slot, and when a run is over: all of it is
// the snapshot's status and context, so a new rule in the machine needs no second copy here.
// The events themselves are read (one exhaustive switch, tracked-execution.ts) only for what a snapshot does not keep:
// the handoff's event id and revision (a re-published message names them), the workers an
// attempt expired on, why the baton came back, and which holds a restarted worker's previous
// process left behind.
//
// Concurrency slots: an execution holds one exactly while the machine says Scheduling,
// Scheduled or Running; it takes it at the handoff (SchedulingStarted before machine version 7)
// and gives it back when the baton comes back or the run ends, once, because the state changes once.
//
// Every executor derives its own view; compare-and-swap appends settle races between them.
import { isFinal, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { ActionPolicy } from '../../schemas/worker-events.ts';
import type { Change } from '../runtime/actor-runtime.ts';
import { AdvertisedWorkers, type WorkerChange } from './advertised-workers.ts';
import { SlotCounts, concurrencyKeyOf, slotBucket } from './concurrency-slots.ts';
import { HOLDS_SLOT, phaseOf, type ActionGauges, type Phase, type CancelRequest, type HandedOffExecution, type Orphan, type RetryDecision, type RunningExecution, type WorkerStatus } from './scheduling-entries.ts';
import { noteEvent, type TrackedExecution } from './tracked-execution.ts';
import { WaitingQueue } from './waiting-queue.ts';

export type ExecutionChange = Change<ExecutionSnapshot, ExecutionEvent>;

export class SchedulingView {
  readonly #entries = new Map<string, TrackedExecution>();
  readonly #waiting = new WaitingQueue();
  readonly #advertised = new AdvertisedWorkers();
  readonly #slots = new SlotCounts();
  readonly #load = new Map<string, number>();
  /** Executions held by a previous process of their worker id, not reclaimed yet (see Orphan). */
  readonly #orphans = new Map<string, Orphan>();
  /** Executions whose action no worker has advertised yet, per action: their keys wait for its policy. */
  readonly #unkeyed = new Map<string, Set<string>>();
  /** The executions in each phase, so a question about one phase visits only those. */
  readonly #inPhase: Record<Phase, Set<string>> = { waiting: new Set(), 'retry-pending': new Set(), scheduling: new Set(), 'handed-off': new Set(), running: new Set() };
  /** Retry decisions another executor made first: not offered again until the execution changes. */
  readonly #retryDecided = new Set<string>();
  #seq = 0;

  /** One change of one execution. Returns whether it may let something be scheduled, and the final state it reached, if any. */
  applyExecution(change: ExecutionChange): { unblocks: boolean; terminal: string | null } {
    const { id, after } = change;
    let e = this.#entries.get(id);
    if (!e) {
      if (isFinal(after)) return { unblocks: false, terminal: null };
      e = this.#track(id, after, change.events[0]?.recordedAt?.getTime() ?? Date.parse(after.context.requestedAt));
    }
    for (const c of change.events) if (noteEvent(e, c.event, c) === 'started') this.#orphans.delete(id); // started after the new process announced itself: its own
    e.snapshot = after;
    this.#retryDecided.delete(id);
    const before = e.phase;
    const phase = phaseOf(statusOf(after), after.context.retryPending);
    this.#leave(id, e);
    if (phase === undefined) {
      this.#forget(id, e);
      return { unblocks: true, terminal: statusOf(after) };
    }
    this.#enter(id, e, phase, change);
    // A wait ended or began, a slot or a worker's capacity was given back: a pass may place more.
    return { unblocks: phase === 'waiting' || phase === 'retry-pending' || (before !== undefined && HOLDS_SLOT.has(before) && !HOLDS_SLOT.has(phase)), terminal: null };
  }

  /** One change of one worker id's stream. Returns whether scheduling may change. */
  applyWorker(change: WorkerChange): boolean {
    const applied = this.#advertised.apply(change);
    if (applied.restarted) {
      // A new process under a known id: whatever the id still holds, the previous process held
      // (a clean stop holds nothing; a lost one's reclaims may not all have landed).
      for (const x of this.heldBy(change.id)) this.#orphans.set(x.executionId, { ...x, workerId: change.id });
    }
    for (const action of applied.advertised) this.#keyWaiting(action);
    return true;
  }

  #track(id: string, after: ExecutionSnapshot, at: number): TrackedExecution {
    const c = after.context;
    // The key is computed once, from the policy known when the execution is first seen (or when
    // the action's first policy arrives), so every executor derives the same one; keeping every
    // waiting input until it is scheduled would cost memory in proportion to the backlog.
    const known = this.#advertised.knows(c.action);
    const e: TrackedExecution = {
      action: c.action,
      namespace: c.namespace,
      priority: c.priority ?? 0,
      seq: this.#seq++,
      bucket: slotBucket(c.action, known ? concurrencyKeyOf(this.#advertised.policyOf(c.action)?.concurrency?.key, c.input) : null),
      ...(!known && { input: c.input }),
      avoid: new Set(),
      limitRecorded: false,
      returned: 'returned',
      since: at,
      holdsSlot: false,
      snapshot: after,
    };
    this.#entries.set(id, e);
    if (!known) {
      let set = this.#unkeyed.get(c.action);
      if (!set) this.#unkeyed.set(c.action, (set = new Set()));
      set.add(id);
    }
    return e;
  }

  #enter(id: string, e: TrackedExecution, phase: Phase, change: ExecutionChange): void {
    e.phase = phase;
    this.#inPhase[phase].add(id);
    const c = e.snapshot.context;
    if (HOLDS_SLOT.has(phase)) this.#slots.take(e);
    if (c.workerId !== null && (phase === 'handed-off' || phase === 'running')) {
      e.heldBy = c.workerId;
      this.#load.set(c.workerId, (this.#load.get(c.workerId) ?? 0) + 1);
    }
    if (phase === 'waiting') {
      const notBefore = c.retryAt ? Date.parse(c.retryAt) : 0;
      this.#waiting.add({ executionId: id, action: e.action, priority: e.priority, seq: e.seq, notBefore, since: Math.max(e.since, notBefore), avoid: [...e.avoid], bucket: e.bucket, namespace: c.namespace, ...(c.pinnedVersion !== undefined && { version: c.pinnedVersion }) });
    }
    if (phase === 'handed-off' && !e.handoff) throw new Error(`execution ${id} is Scheduled but no ExecutionHandedOff was seen (${change.source})`);
  }

  #leave(id: string, e: TrackedExecution): void {
    if (e.phase === undefined) return;
    this.#inPhase[e.phase].delete(id);
    this.#waiting.remove(id);
    this.#slots.free(e);
    if (e.heldBy !== undefined) {
      const n = (this.#load.get(e.heldBy) ?? 1) - 1;
      if (n > 0) this.#load.set(e.heldBy, n);
      else this.#load.delete(e.heldBy);
      e.heldBy = undefined;
    }
    e.phase = undefined;
  }

  /** It reached a final state: nothing about it is needed any more. */
  #forget(id: string, e: TrackedExecution): void {
    this.#entries.delete(id);
    this.#orphans.delete(id);
    this.#retryDecided.delete(id);
    const unkeyed = this.#unkeyed.get(e.action);
    unkeyed?.delete(id);
    if (unkeyed?.size === 0) this.#unkeyed.delete(e.action);
  }

  /** The action's policy is known now: compute the keys its executions could not get before. */
  #keyWaiting(action: string): void {
    const ids = this.#unkeyed.get(action);
    if (!ids) return;
    this.#unkeyed.delete(action);
    const path = this.#advertised.policyOf(action)?.concurrency?.key;
    for (const id of ids) {
      const e = this.#entries.get(id);
      if (!e) continue;
      const bucket = slotBucket(action, concurrencyKeyOf(path, e.input));
      delete e.input;
      if (bucket === e.bucket) continue;
      const held = e.holdsSlot;
      if (held) this.#slots.free(e);
      e.bucket = bucket;
      if (held) this.#slots.take(e);
      this.#waiting.rebucket(id, bucket);
    }
  }

  // --- what the executor asks ------------------------------------------------------------------

  /** The waiting executions, for placement (placement.ts). */
  get queue(): WaitingQueue {
    return this.#waiting;
  }

  /** The action's concurrency limit (per key when its policy names one), or undefined when it has none. */
  concurrencyLimitOf(action: string): number | undefined {
    return this.#advertised.policyOf(action)?.concurrency?.limit;
  }

  /** Slots held by the namespace's executions (scheduled, handed off or running), for its concurrency limit. */
  heldInNamespace(namespace: string): number {
    return this.#slots.heldInNamespace(namespace);
  }

  /** Slots the bucket has free now (Infinity when the action has no limit); never negative. */
  freeSlots(action: string, bucket: string): number {
    const limit = this.concurrencyLimitOf(action);
    return limit === undefined ? Infinity : Math.max(0, limit - this.#slots.heldIn(bucket));
  }

  /** Per action: waiting, of those the ones whose bucket is at its limit, slots held, and the limit. For metrics: O(waiting). */
  actionGauges(): Map<string, ActionGauges> {
    const out = new Map<string, ActionGauges>();
    const entry = (action: string) => {
      let g = out.get(action);
      if (!g) out.set(action, (g = { waiting: 0, atLimit: 0, held: 0, limit: this.concurrencyLimitOf(action) }));
      return g;
    };
    for (const { w } of this.#waiting.values()) {
      const g = entry(w.action);
      g.waiting++;
      if (this.freeSlots(w.action, w.bucket) === 0) g.atLimit++;
    }
    for (const [action, n] of this.#slots.byAction()) entry(action).held = n;
    for (const action of this.#advertised.limitedActions()) entry(action);
    return out;
  }

  /** The earliest future time a waiting retry may be scheduled, if any. */
  nextRetryAt(now: number): number | undefined {
    return this.#waiting.nextRetryAt(now);
  }

  /** Executions this view believes a worker holds (handed off or running). */
  loadOf(workerId: string): number {
    return this.#load.get(workerId) ?? 0;
  }

  /** Executions whose baton came back: each needs ExecutionRetryScheduled, ExecutionAbandoned or (after a cancel request) ExecutionCancelled. */
  retryPending(): RetryDecision[] {
    const out: RetryDecision[] = [];
    for (const id of this.#inPhase['retry-pending']) {
      if (this.#retryDecided.has(id)) continue;
      const e = this.#entries.get(id)!;
      const c = e.snapshot.context;
      out.push({
        executionId: id,
        action: e.action,
        attempt: c.attempt,
        maxAttempts: c.maxAttempts,
        limitRecorded: e.limitRecorded,
        reason: e.returned,
        ...(c.cancelRequested !== undefined && { cancelRequested: c.cancelRequested }),
      });
    }
    return out;
  }

  /** A decision this executor could not append (another executor made it): not offered again until the execution changes. */
  decided(executionId: string): void {
    this.#retryDecided.add(executionId);
  }

  handoffOf(executionId: string): HandedOffExecution | undefined {
    const e = this.#entries.get(executionId);
    return e?.phase === 'handed-off' ? this.#handedOffOf(executionId, e) : undefined;
  }

  handedOff(): HandedOffExecution[] {
    return [...this.#inPhase['handed-off']].map((id) => this.#handedOffOf(id, this.#entries.get(id)!));
  }

  #handedOffOf(id: string, e: TrackedExecution): HandedOffExecution {
    const c = e.snapshot.context;
    return {
      executionId: id,
      workerId: c.workerId!,
      action: e.action,
      attempt: c.attempt,
      handoffEventId: e.handoff!.eventId,
      handoffRevision: e.handoff!.revision,
      handedOffAt: e.handoff!.at,
      deadline: Date.parse(c.deadline!),
    };
  }

  waitingCount(): number {
    return this.#waiting.size;
  }

  /** Handoffs whose schedule-to-start deadline passed before the worker started. */
  expiredHandoffs(now: number): HandedOffExecution[] {
    return this.handedOff().filter((h) => h.deadline <= now);
  }

  /** Runs whose recorded start-to-close deadline is more than `graceMs` past. */
  overdueRuns(now: number, graceMs: number): RunningExecution[] {
    const runs = [...this.#inPhase.running].map((id): RunningExecution => {
      const c = this.#entries.get(id)!.snapshot.context;
      return { executionId: id, workerId: c.workerId!, attempt: c.attempt, deadline: c.deadline };
    });
    return runs.filter((r) => r.deadline !== null && Date.parse(r.deadline) + graceMs <= now);
  }

  /** The worker whose load counts the execution now (handed off to it or running on it), if any. */
  holderOf(executionId: string): string | undefined {
    return this.#entries.get(executionId)?.heldBy;
  }

  /** What a worker holds: handed off to it, or running on it. */
  heldBy(workerId: string): { executionId: string; attempt: number }[] {
    return [...this.#held()].filter(([, e]) => e.heldBy === workerId).map(([id, e]) => ({ executionId: id, attempt: e.snapshot.context.attempt }));
  }

  /** What workers whose stream says Stopped still hold, by worker id (a handoff that landed as one drained). */
  heldByStopped(): Map<string, { executionId: string; attempt: number }[]> {
    const stopped = new Set([...this.#held()].flatMap(([, e]) => (e.heldBy !== undefined && this.workerStatus(e.heldBy) === 'stopped' ? [e.heldBy] : [])));
    return new Map([...stopped].map((workerId) => [workerId, this.heldBy(workerId)]));
  }

  /** Every execution a worker holds: handed off to it, or running on it. */
  *#held(): Generator<[string, TrackedExecution]> {
    for (const phase of ['handed-off', 'running'] as const) for (const id of this.#inPhase[phase]) yield [id, this.#entries.get(id)!];
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
    for (const [id, e] of this.#held()) {
      const c = e.snapshot.context;
      if (c.cancelRequested !== undefined) requests.push({ executionId: id, workerId: c.workerId!, attempt: c.attempt, reason: c.cancelRequested });
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

  /** The namespaces the worker serves (its WorkerStarted); undefined: every namespace. */
  workerNamespaces(workerId: string): readonly string[] | undefined {
    return this.#advertised.namespacesOf(workerId);
  }
}
