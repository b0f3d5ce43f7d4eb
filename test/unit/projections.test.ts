// The projections' pure folds on hand-made and generated event sequences, including
// duplicates and replays. The executions fold must agree with the machine on every path.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { foldExecution, isFinal, statusOf } from '../../actors/execution.machine.ts';
import { applyRowChange, bucketValue, durationBucket, emptyActionStats, percentile, type ActionStatsRow } from '../../projections/action-stats.ts';
import { executionEventRow } from '../../projections/execution-events.ts';
import { foldExecutionEvent, foldExecutionRow, foldExecutionStream, foldOfRow, isStalled, rowOf, snapshotFromRow, type ExecutionFold, type ExecutionRow } from '../../projections/executions.ts';
import { foldWorkerRow, type WorkerRow } from '../../projections/workers.ts';
import type { ExecutionEvent, ExecutionEventOf } from '../../schemas/events.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { at, ev, generateExecutionPaths } from '../support/execution-paths.ts';
import { randomHistory, seededRandom } from '../support/random-histories.ts';

let position = 0n;
/** Stored events of one stream, as the store would return them. */
function stored(streamId: string, events: readonly { type: string; data: unknown; metadata: Record<string, unknown> }[]): StoredEvent[] {
  return events.map((e, i) => ({
    eventId: randomUUID(),
    streamId,
    revision: BigInt(i),
    globalPosition: ++position,
    type: e.type,
    data: e.data,
    metadata: e.metadata,
    recordedAt: new Date(Date.parse(String(e.metadata['occurredAt'])) + 5),
  }));
}
const executionStream = (events: readonly ExecutionEvent[], id: string = randomUUID()) => stored(`execution-${id}`, events);

function foldAll(events: readonly StoredEvent[], start?: ExecutionRow): ExecutionRow | undefined {
  let row = start;
  for (const e of events) row = foldExecutionRow(row, e).row;
  return row;
}

describe('executions fold', () => {
  const paths = generateExecutionPaths();

  it('agrees with the machine on every generated path, and resumes from its own row', () => {
    expect(paths.length).toBeGreaterThan(300);
    for (const path of paths) {
      const events = executionStream(path.events);
      const row = foldExecutionStream(events)!;
      expect(row.status).toBe(path.finalStatus);
      expect(row.owner).toBe(path.finalContext.owner);
      expect(row.attempt).toBe(path.finalContext.attempt);
      expect(row.owners).toEqual(path.finalContext.owners);
      expect(row.revision).toBe(events.length - 1);
      expect(row.refusedEvents).toBe(0);
      // The row stands for the same machine state: same status, finality and context.
      const snapshot = snapshotFromRow(row);
      expect(statusOf(snapshot)).toBe(path.finalStatus);
      expect(isFinal(snapshot)).toBe(isFinal(path.finalSnapshot));
      expect(JSON.parse(JSON.stringify(snapshot.context))).toEqual(JSON.parse(JSON.stringify(path.finalContext)));
    }
  });

  it('gives the same row folded on snapshots with a row only at batch ends, wherever the batches end, as row by row', () => {
    for (const path of paths) {
      const events = executionStream(path.events);
      const byRow = foldAll(events);
      for (let cut = 0; cut <= events.length; cut++) {
        // The projector's way: fold a batch on the snapshot, write the row, resume the next batch from it.
        let fold: ExecutionFold | undefined;
        for (const e of events.slice(0, cut)) fold = foldExecutionEvent(fold, e).fold;
        const written = fold && rowOf(fold);
        fold = written && foldOfRow(written);
        for (const e of events.slice(cut)) fold = foldExecutionEvent(fold, e).fold;
        expect(fold && rowOf(fold)).toEqual(byRow);
      }
    }
  });

  it('agrees with the machine on random histories with action versions, pinned and not, and shows the version', () => {
    const random = seededRandom(5);
    for (let i = 0; i < 500; i++) {
      const events = randomHistory(random, { recordStateAfter: false, versions: true }).map((e) => ({ type: e.type, data: e.data, metadata: e.metadata }) as ExecutionEvent);
      const folded = foldExecution(events);
      const row = foldExecutionStream(executionStream(events))!;
      expect(row.refusedEvents).toBe(0);
      expect(row.pinnedVersion).toBe(folded.context.pinnedVersion ?? null);
      const handoffs = events.filter((e) => e.type === 'ExecutionHandedOff');
      const last = handoffs.at(-1) as ExecutionEventOf<'ExecutionHandedOff'> | undefined;
      expect(row.actionVersion).toBe(last ? (last.data.actionVersion ?? 1) : (folded.context.pinnedVersion ?? null));
      expect(JSON.parse(JSON.stringify(snapshotFromRow(row).context))).toEqual(JSON.parse(JSON.stringify(folded.context)));
    }
  });

  it('ignores duplicates and replays: every event twice, and the whole stream again, give the same row', () => {
    for (const path of paths.filter((_, i) => i % 7 === 0)) {
      const events = executionStream(path.events);
      const once = foldAll(events);
      const doubled = foldAll(events.flatMap((e) => [e, e]));
      const replayed = foldAll(events, once);
      expect(doubled).toEqual(once);
      expect(replayed).toEqual(once);
    }
  });

  it('derives times and durations from the events, never from a clock', () => {
    const events = executionStream([
      ev.requested({ idempotencyKey: 'k1', priority: 5 }, { at: at(0) }),
      ev.schedulingStarted({ at: at(1) }),
      ev.handedOff('w1', 1, { at: at(2), deadline: at(32) }),
      ev.started('w1', 1, { at: at(3), deadline: at(303) }),
      ev.progressed('w1', { pct: 50 }, { at: at(4) }),
      ev.completed('w1', { ok: true }, { at: at(10) }),
    ]);
    const row = foldExecutionStream(events)!;
    expect(row).toMatchObject({
      status: 'Completed',
      workerId: 'w1',
      owner: 'worker:w1',
      owners: ['executor', 'worker:w1'],
      result: { ok: true },
      idempotencyKey: 'k1',
      priority: 5,
      requestedAt: at(0),
      scheduledAt: at(2),
      startedAt: at(3),
      finishedAt: at(10),
      lastProgressAt: at(4),
      lastProgress: { pct: 50 },
      leaseDeadline: null,
      runMs: 7_000,
      totalMs: 10_000,
    });
  });

  it('keeps the lease deadline of the current state', () => {
    const events = executionStream([ev.requested(), ev.schedulingStarted(), ev.handedOff('w1', 1, { deadline: at(32) })]);
    expect(foldExecutionStream(events)!.leaseDeadline).toBe(at(32));
  });

  it('counts an event the machine refuses, leaves the row as it was and moves past it', () => {
    const events = executionStream([ev.requested(), ev.started('w1', 1)]);
    const first = foldExecutionRow(undefined, events[0]!);
    const outcome = foldExecutionRow(first.row, events[1]!);
    expect(outcome.kind).toBe('refused');
    expect(outcome.kind === 'refused' && outcome.reason).toMatch(/not allowed in state Requested/);
    expect(outcome.row).toEqual({ ...first.row, revision: 1, refusedEvents: 1 });
  });

  it('refuses a stream whose first event is not ExecutionRequested', () => {
    const [event] = executionStream([ev.schedulingStarted()]);
    expect(foldExecutionRow(undefined, event!)).toMatchObject({ kind: 'refused', row: undefined });
  });

  it('keeps the tags: the submitter’s merged with those added while running, {} when none, and resumes from them', () => {
    const events = [ev.requested({ tags: { customer: 'c-1' } }), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.tagged('a', { invoice: 'inv-7', customer: 'c-2' })];
    const row = foldExecutionStream(executionStream(events))!;
    expect(row.tags).toEqual({ customer: 'c-2', invoice: 'inv-7' });
    expect(snapshotFromRow(row).context.tags).toEqual(row.tags);
    expect(foldExecutionStream(executionStream([ev.requested()]))!.tags).toEqual({});
    expect('tags' in snapshotFromRow(foldExecutionStream(executionStream([ev.requested()]))!).context).toBe(false);
  });

  it('ignores events of other streams', () => {
    const [event] = stored('worker-w1', [{ type: 'WorkerStarted', data: {}, metadata: { by: 'worker:w1', occurredAt: at(0) } }]);
    expect(foldExecutionRow(undefined, event!)).toEqual({ kind: 'skipped', row: undefined });
  });
});

describe('action stats', () => {
  function statsOf(streams: StoredEvent[][]): ActionStatsRow {
    let stats = emptyActionStats('http.get');
    for (const events of streams) {
      let row: ExecutionRow | undefined;
      for (const e of events) {
        const outcome = foldExecutionRow(row, e);
        if (outcome.kind === 'applied') stats = applyRowChange(stats, row, outcome.row);
        row = outcome.row;
      }
    }
    return stats;
  }

  it('composes: from the first row of a batch to its last, the stats change as they do step by step', () => {
    for (const path of generateExecutionPaths()) {
      const events = executionStream(path.events);
      // The row and the stats after each prefix, folded step by step.
      const rows: (ExecutionRow | undefined)[] = [undefined];
      const stats = [emptyActionStats('http.get')];
      for (const e of events) {
        const outcome = foldExecutionRow(rows.at(-1), e);
        stats.push(outcome.kind === 'applied' ? applyRowChange(stats.at(-1)!, rows.at(-1), outcome.row) : stats.at(-1)!);
        rows.push(outcome.row);
      }
      for (let cut = 0; cut < events.length; cut++) {
        expect(applyRowChange(stats[cut]!, rows[cut], rows.at(-1)!)).toEqual(stats.at(-1));
      }
    }
  });

  it('counts requests, gauges queued and running, and counts final states once', () => {
    const completed = executionStream([ev.requested(), ev.schedulingStarted(), ev.handedOff('w1', 1), ev.started('w1', 1), ev.completed('w1', 1, { at: at(5) })]);
    const running = executionStream([ev.requested(), ev.schedulingStarted(), ev.handedOff('w1', 1), ev.started('w1', 1)]);
    const queued = executionStream([ev.requested(), ev.schedulingStarted()]);
    const retriedThenFailed = executionStream([
      ev.requested(),
      ev.schedulingStarted(),
      ev.handedOff('w1', 1),
      ev.started('w1', 1),
      ev.failed('w1', true),
      ev.retryScheduled(2),
      ev.schedulingStarted(),
      ev.handedOff('w2', 2),
      ev.started('w2', 2),
      ev.failed('w2', true),
    ]);
    expect(statsOf([completed, running, queued, retriedThenFailed])).toMatchObject({
      requested: 4,
      queued: 1,
      running: 1,
      completed: 1,
      failed: 1,
      retried: 1,
      cancelled: 0,
    });
  });

  it('reads percentiles from the histogram within its resolution', () => {
    let stats = emptyActionStats('x');
    const durations = Array.from({ length: 100 }, (_, i) => (i + 1) * 10); // 10 … 1000 ms
    for (const ms of durations) {
      const before = { status: 'Running', attempt: 1 } as ExecutionRow;
      stats = applyRowChange(stats, before, { status: 'Completed', attempt: 1, runMs: ms } as ExecutionRow);
    }
    expect(stats.completed).toBe(100);
    expect(stats.running).toBe(-100); // only transitions were fed in, never the entry into Running
    expect(percentile(stats.durationHistogram, 0.5)! / 500).toBeCloseTo(1, 1);
    expect(percentile(stats.durationHistogram, 0.95)! / 950).toBeCloseTo(1, 1);
    expect(percentile({}, 0.5)).toBeNull();
  });

  it('puts every duration in a bucket whose value is within 2.5%', () => {
    for (const ms of [1, 2, 7, 99, 1234, 86_400_000]) {
      expect(Math.abs(bucketValue(durationBucket(ms)) - ms) / ms).toBeLessThan(0.026);
    }
    expect(durationBucket(0)).toBe(0);
    expect(bucketValue(0)).toBe(0);
  });
});

describe('workers fold', () => {
  const workerEvents = stored('worker-w1', [
    { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 4, host: 'h', pid: 42 }, metadata: { by: 'worker:w1', occurredAt: at(0) } },
    { type: 'WorkerDraining', data: { reason: 'SIGTERM' }, metadata: { by: 'worker:w1', occurredAt: at(10) } },
    { type: 'WorkerStopped', data: { reason: 'drained' }, metadata: { by: 'worker:w1', occurredAt: at(11) } },
  ]);
  const outcomes = executionStream([ev.requested(), ev.schedulingStarted(), ev.handedOff('w1', 1), ev.started('w1', 1), ev.completed('w1', 1)]);

  const foldWorkers = (events: StoredEvent[], start?: WorkerRow) => events.reduce<WorkerRow | undefined>((row, e) => foldWorkerRow(row, e), start);

  it('follows the lifecycle and counts the outcomes the worker appended', () => {
    const row = foldWorkers([...workerEvents.slice(0, 1), ...outcomes, ...workerEvents.slice(1)])!;
    expect(row).toMatchObject({ workerId: 'w1', status: 'stopped', statusReason: 'drained', actions: ['core.noop'], capacity: 4, pid: 42, started: 1, completed: 1, startedAt: at(0), statusChangedAt: at(11) });
  });

  it('keeps the policies and global position of the latest WorkerStarted', () => {
    const policies = { 'core.noop': { concurrency: { limit: 3, key: 'tenantId' } } };
    const [first, second] = stored('worker-w1', [
      { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 4, policies }, metadata: { by: 'worker:w1', occurredAt: at(0) } },
      { type: 'WorkerStarted', data: { actions: ['core.noop'], runtimes: ['node'], capacity: 4 }, metadata: { by: 'worker:w1', occurredAt: at(5) } },
    ]);
    const once = foldWorkers([first!])!;
    expect(once).toMatchObject({ policies, startedPosition: Number(first!.globalPosition) });
    expect(foldWorkers([first!, second!])).toMatchObject({ policies: {}, startedPosition: Number(second!.globalPosition) });
    expect(foldWorkers(outcomes)).toMatchObject({ policies: {}, startedPosition: null });
  });

  it('knows a worker from its outcomes before its WorkerStarted arrives', () => {
    expect(foldWorkers(outcomes)).toMatchObject({ status: 'unknown', started: 1, completed: 1 });
  });

  it('ignores replayed worker-stream events', () => {
    const once = foldWorkers(workerEvents)!;
    expect(foldWorkers(workerEvents, once)).toEqual(once);
    expect(foldWorkers(workerEvents.flatMap((e) => [e, e]))).toEqual(once);
  });

  it('ignores events that are about no worker', () => {
    const [requested] = outcomes;
    expect(foldWorkerRow(undefined, requested!)).toBeUndefined();
  });
});

describe('execution_events fold', () => {
  it('maps an execution event to its timeline row and skips other streams', () => {
    const [e] = executionStream([ev.requested({}, { at: at(0) })], '00000000-0000-4000-8000-000000000001');
    expect(executionEventRow(e!)).toMatchObject({
      executionId: '00000000-0000-4000-8000-000000000001',
      revision: 0,
      type: 'ExecutionRequested',
      by: 'executor',
      occurredAt: at(0),
      globalPosition: String(e!.globalPosition),
    });
    const [w] = stored('worker-w1', [{ type: 'WorkerStopped', data: {}, metadata: { by: 'worker:w1', occurredAt: at(0) } }]);
    expect(executionEventRow(w!)).toBeUndefined();
  });
});

describe('stalled', () => {
  const row = { status: 'Running', stallTimeoutMs: 1_000, lastProgressAt: null, startedAt: at(0) };
  it('is a running execution without progress for longer than its stall limit', () => {
    const t0 = Date.parse(at(0));
    expect(isStalled(row, t0 + 1_000)).toBe(false);
    expect(isStalled(row, t0 + 1_001)).toBe(true);
    expect(isStalled({ ...row, lastProgressAt: at(1) }, t0 + 1_500)).toBe(false);
    expect(isStalled({ ...row, stallTimeoutMs: null }, t0 + 99_000)).toBe(false);
    expect(isStalled({ ...row, status: 'Completed' }, t0 + 99_000)).toBe(false);
  });
  it('takes its limit from ExecutionStarted, per run', () => {
    const events = executionStream([ev.requested(), ev.schedulingStarted(), ev.handedOff('w1', 1), { ...ev.started('w1', 1), data: { attempt: 1, deadline: at(303), stallTimeoutMs: 5_000 } }]);
    expect(foldExecutionStream(events)).toMatchObject({ status: 'Running', stallTimeoutMs: 5_000 });
  });
});
