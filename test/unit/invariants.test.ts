// The invariant checker on hand-made histories in an in-memory store: the store is a fake
// (pure checker tests; test/integration/invariants.test.ts runs it on Postgres), the events
// are built with the catalog's schemas, and the tampered ones are written straight into it.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { executionStreamId, type ExecutionEvent } from '../../schemas/events.ts';
import type { AppendOutcome, AppendRequest, AppendResult, EventStore, NewEvent, ReadAllOptions, StoredEvent } from '../../src/eventstore/event-store.ts';
import { checkExecution, checkInvariants, describeReport, type InvariantReport } from '../../src/verify/invariants.ts';
import { appendEach } from '../../src/eventstore/append-validation.ts';
import { at, ev, withBy } from '../support/execution-paths.ts';

/** Just enough EventStore for the checker: readAll in append order, readStream, raw writes. */
class MemoryStore implements EventStore {
  readonly events: StoredEvent[] = [];
  readAllCalls = 0;

  /** Write events to a stream as given: no revision check, so tests can store what append would refuse. */
  put(streamId: string, events: readonly ExecutionEvent[], o: { revisions?: number[] } = {}): void {
    const base = this.events.filter((e) => e.streamId === streamId).length;
    events.forEach((e, i) => {
      this.events.push({
        eventId: randomUUID(),
        streamId,
        revision: BigInt(o.revisions?.[i] ?? base + i),
        globalPosition: BigInt(this.events.length + 1),
        type: e.type,
        data: e.data,
        metadata: e.metadata,
        recordedAt: new Date(),
      });
    });
  }

  appendMany(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    return appendEach((streamId, events) => this.append(streamId, events), requests);
  }

  async append(streamId: string, events: NewEvent[]): Promise<AppendResult> {
    this.put(streamId, events as unknown as ExecutionEvent[]);
    return { nextExpectedRevision: BigInt(events.length - 1), lastPosition: BigInt(this.events.length), idempotentReplay: false };
  }
  async readStream(streamId: string): Promise<StoredEvent[]> {
    return this.events.filter((e) => e.streamId === streamId).sort((a, b) => Number(a.revision - b.revision));
  }
  async readAll(o: ReadAllOptions): Promise<StoredEvent[]> {
    this.readAllCalls++;
    return this.events
      .filter((e) => e.globalPosition > o.after && (!o.streamPrefixes || o.streamPrefixes.some((p) => e.streamId.startsWith(p))))
      .slice(0, o.limit);
  }
  subscribe(): AsyncIterable<StoredEvent> {
    throw new Error('not used by the checker');
  }
  deleteStream(): Promise<{ deleted: number }> {
    throw new Error('not used by the checker');
  }
  async close(): Promise<void> {}
}

/** A history, stored under a fresh execution id. */
function stored(store: MemoryStore, events: ExecutionEvent[], o: { revisions?: number[] } = {}): string {
  const id = randomUUID();
  store.put(executionStreamId(id), events, o);
  return id;
}

const completedHistory = () => [ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.completed('a')];
const retriedHistory = () => [
  ev.requested({ maxAttempts: 2 }),
  ev.schedulingStarted(),
  ev.handedOff('a', 1),
  ev.started('a', 1),
  ev.failed('a', true),
  ev.retryScheduled(2),
  ev.schedulingStarted(),
  ev.handedOff('b', 2),
  ev.started('b', 2),
  ev.completed('b'),
];
// Long after every fixed instant the builders use (2025-01-01 …).
const LATER = { now: () => new Date(Date.parse(at(0)) + 3_600_000) };

describe('checkInvariants', () => {
  it('passes a store of well-formed histories: completed, retried, failed for good, cancelled, abandoned', async () => {
    const store = new MemoryStore();
    stored(store, completedHistory());
    stored(store, retriedHistory());
    stored(store, [ev.requested({ maxAttempts: 1 }), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.failed('a', true)]);
    stored(store, [ev.requested(), ev.cancelled('executor')]);
    stored(store, [ev.requested({ maxAttempts: 1 }), ev.schedulingStarted(), ev.handedOff('a', 1), ev.reclaimed('a', 1), ev.abandoned()]);
    const r = await checkInvariants(store, { requireTerminal: true, ...LATER });
    expect(r, describeReport(r)).toMatchObject({ ok: true, executions: 5, terminal: 5, inFlight: 0, stuck: [], lost: [], duplicatedRuns: 0, violations: [] });
    expect(r.statuses).toEqual({ Completed: 2, Failed: 1, Cancelled: 1, Abandoned: 1 });
  });

  it('pages through readAll and reads every stream once', async () => {
    const store = new MemoryStore();
    const ids = Array.from({ length: 7 }, () => stored(store, completedHistory()));
    store.put('worker-x', [ev.requested()]); // not an execution stream: ignored
    const r = await checkInvariants(store, { pageSize: 3, concurrency: 2, expectedExecutionIds: ids, requireTerminal: true });
    expect(r.ok, describeReport(r)).toBe(true);
    expect(r.executions).toBe(7);
    expect(store.readAllCalls).toBe(Math.ceil(35 / 3) + 1); // 35 events, then one empty page
  });

  it('counts an archived execution whose deleted stream readAll still lists (EventStoreDB before a scavenge) as archived, not lost', async () => {
    const store = new MemoryStore();
    const done = stored(store, completedHistory());
    const archived = randomUUID();
    const lost = randomUUID();
    const readStream = store.readStream.bind(store);
    // Both listed by readAll, neither readable: one was archived (deleted), the other never stored.
    store.readStream = async (streamId) => (streamId === executionStreamId(done) ? readStream(streamId) : []);
    const r = await checkInvariants(store, { expectedExecutionIds: [done, archived, lost], archivedStreams: new Set([executionStreamId(archived)]) });
    expect(r).toMatchObject({ executions: 1, lost: [lost] });
  });

  it('reports an expected id without a stream as lost, apart from stuck ones', async () => {
    const store = new MemoryStore();
    const done = stored(store, completedHistory());
    const running = stored(store, completedHistory().slice(0, 4));
    const missing = randomUUID();
    const r = await checkInvariants(store, { expectedExecutionIds: [done, running, missing], requireTerminal: true });
    expect(r).toMatchObject({ ok: false, executions: 2, terminal: 1, lost: [missing], stuck: [running], violations: [] });
  });

  it('without requireTerminal, counts a non-final execution as in flight until it is past its deadline', async () => {
    const store = new MemoryStore();
    const justStarted = stored(store, completedHistory().slice(0, 4)); // start-to-close deadline at(303)
    const noDeadline = stored(store, [...completedHistory().slice(0, 3), ev.started('a', 1, { deadline: null })]);
    const waiting = stored(store, [ev.requested()]);
    const undecided = stored(store, [ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.failed('a', true)]);

    const early = await checkInvariants(store, { now: () => new Date(at(30)), stuckAfterMs: 60_000 });
    expect(early).toMatchObject({ ok: true, inFlight: 4, stuck: [] });

    const late = await checkInvariants(store, { now: () => new Date(at(303 + 61)), stuckAfterMs: 60_000 });
    expect(late.stuck).toEqual([justStarted, undecided].sort());
    expect(late.inFlight).toBe(2);
    expect(late.ok).toBe(false);
    expect([noDeadline, waiting].some((id) => late.stuck.includes(id))).toBe(false);
  });

  it('flags a second terminal event (invariant 2) without reporting it twice', async () => {
    const store = new MemoryStore();
    const id = stored(store, [...completedHistory(), ev.completed('a')]);
    const r = await checkInvariants(store);
    expect(r.ok).toBe(false);
    expect(r.violations).toEqual([{ invariant: 2, executionId: id, message: expect.stringMatching(/^2 terminal events; exactly one.*revision 4 \(ExecutionCompleted.*revision 5 \(ExecutionCompleted/) }]);
    expect(r.terminal).toBe(1);
  });

  it('counts an attempt started twice as a duplicated run (invariant 2)', async () => {
    const store = new MemoryStore();
    const id = stored(store, [...completedHistory().slice(0, 4), ev.started('a', 1), ev.completed('a')]);
    const r = await checkInvariants(store);
    expect(r.duplicatedRuns).toBe(1);
    expect(r.violations).toEqual([{ invariant: 2, executionId: id, message: 'attempt 1 started 2 times (revisions 3, 4): an action ran twice without a new attempt' }]);
    // A rerun as a new attempt is fine.
    const fine = new MemoryStore();
    stored(fine, retriedHistory());
    expect((await checkInvariants(fine)).duplicatedRuns).toBe(0);
  });

  it('requires contiguous revisions from 0 and ExecutionRequested first (invariant 3)', async () => {
    const store = new MemoryStore();
    const gap = stored(store, completedHistory(), { revisions: [0, 1, 2, 4, 5] });
    const headless = stored(store, completedHistory().slice(1));
    const r = await checkInvariants(store);
    expect(r.violations).toContainEqual({ invariant: 3, executionId: gap, message: 'revisions are not contiguous from 0: position 3 holds revision 4; position 4 holds revision 5' });
    expect(r.violations).toContainEqual({ invariant: 3, executionId: headless, message: 'the first event is SchedulingStarted, not ExecutionRequested' });
    expect(r.stuck).toContain(headless); // nothing known about it can be final
    expect(r.statuses.unreadable).toBe(1);
  });

  it('rejects an event that no longer matches the catalog (invariant 3)', async () => {
    const store = new MemoryStore();
    const bad = { ...ev.completed('a'), data: { result: undefined as never, extra: 1 } } as unknown as ExecutionEvent;
    const id = stored(store, [...completedHistory().slice(0, 4), bad]);
    const r = await checkInvariants(store);
    expect(r.violations).toContainEqual({ invariant: 3, executionId: id, message: expect.stringMatching(/^revision 4 \(ExecutionCompleted by worker:a\) does not match the event catalog: /) });
  });

  it('names the event a stale owner appended after a reclaim (invariant 4)', async () => {
    const store = new MemoryStore();
    const id = stored(store, [
      ev.requested(),
      ev.schedulingStarted(),
      ev.handedOff('a', 1),
      ev.reclaimed('a', 1, 'worker-lost'),
      ev.started('a', 1), // worker a, too late: the baton is back with the executor
      ev.handedOff('b', 1), // the unstarted attempt, handed off again (machine v8)
      ev.started('b', 1),
      ev.completed('b'),
    ]);
    const r = await checkInvariants(store, { requireTerminal: true });
    expect(r.violations).toEqual([
      // Counted from the stream as stored (independent of the fold): the stale start and b's are both attempt 1's.
      { invariant: 2, executionId: id, message: 'attempt 1 started 2 times (revisions 4, 6): an action ran twice without a new attempt' },
      { invariant: 4, executionId: id, message: expect.stringMatching(/^revision 4 \(ExecutionStarted by worker:a\) does not fold in state Requested \(owner executor\): InvalidTransition: /) },
    ]);
    // The rest of the history still folds, so the execution counts as terminal.
    expect(r).toMatchObject({ terminal: 1, stuck: [] });
  });

  it("refuses a non-owner's outcome (invariant 4)", async () => {
    const store = new MemoryStore();
    const id = stored(store, [...completedHistory().slice(0, 4), withBy(ev.completed('a'), 'worker:b'), ev.completed('a')]);
    const r = await checkInvariants(store);
    expect(r.violations).toEqual([{ invariant: 4, executionId: id, message: expect.stringContaining('revision 4 (ExecutionCompleted by worker:b) does not fold in state Running (owner worker:a): NotOwner: worker:b is not the owner') }]);
  });

  it('allows one execution per idempotency key (invariant 6)', async () => {
    const store = new MemoryStore();
    const a = stored(store, [ev.requested({ idempotencyKey: 'order-1' }), ev.cancelled('executor')]);
    const b = stored(store, [ev.requested({ idempotencyKey: 'order-1' }), ev.cancelled('executor')]);
    stored(store, [ev.requested({ idempotencyKey: 'order-2' }), ev.cancelled('executor')]);
    const r = await checkInvariants(store);
    const [first, second] = [a, b].map((id) => r.violations.find((v) => v.executionId === id));
    expect([first, second].filter(Boolean)).toHaveLength(1);
    expect((first ?? second)!.message).toMatch(/^idempotency key "order-1" is also used by execution [0-9a-f-]{36} \(2 executions share it\)$/);
    expect((first ?? second)!.invariant).toBe(6);
  });

  it('describes a failed report with counts, ids and violations', async () => {
    const store = new MemoryStore();
    stored(store, [...completedHistory(), ev.completed('a')]);
    const missing = randomUUID();
    const text = describeReport(await checkInvariants(store, { expectedExecutionIds: [missing] }));
    expect(text).toContain('1 executions: 1 terminal, 0 in flight, 0 stuck, 1 lost, 0 duplicated run(s)');
    expect(text).toContain(`lost (submitted, no stream): ${missing}`);
    expect(text).toMatch(/invariant 2 .*: 2 terminal events/);
    expect(text.endsWith('FAILED')).toBe(true);
  });
});

describe('checkExecution', () => {
  const o = { now: new Date(at(0)), stuckAfterMs: 0 };
  it('reports an empty stream', () => {
    expect(checkExecution('x', [], o).violations).toEqual([{ invariant: 3, executionId: 'x', message: 'the stream is empty' }]);
  });
  it('folds a retried history to Completed with one terminal event', () => {
    const store = new MemoryStore();
    const id = stored(store, retriedHistory());
    const v = checkExecution(id, store.events, o);
    expect(v).toMatchObject({ status: 'Completed', final: true, terminalEvents: 1, duplicatedRuns: 0, violations: [], overdue: false });
  });
});

describe('describeReport', () => {
  const report = (seconds: number): InvariantReport => ({
    ok: true, executions: 1, terminal: 1, inFlight: 0, stuck: [], lost: [], duplicatedRuns: 0, violations: [], statuses: { Completed: 1 },
    readModel: { ok: true, differences: [], projections: [{ projection: 'executions', position: '9', events: 9, rows: {}, behind: { events: 3, oldestAt: new Date().toISOString(), seconds } }] },
  });

  it('asks whether a projector runs only when the read model lags by more than a projector under load would', () => {
    expect(describeReport(report(1.2))).toMatch(/OK: every invariant holds \(the read model is behind the store, not wrong: writes are still coming in\)$/);
    expect(describeReport(report(45))).toMatch(/OK: every invariant holds \(the read model is behind the store, not wrong: is `baton projector` running\?\)$/);
  });
});
