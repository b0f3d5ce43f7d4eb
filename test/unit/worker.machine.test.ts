// The worker machine: every (state, event type) pair, ownership of the worker's own stream,
// restarts as new incarnations, and folding stored histories.
import { describe, expect, it } from 'vitest';
import { transition } from 'xstate';
import {
  WorkerEvent,
  WorkerLost,
  WorkerStarted,
  workerEventTypes,
  workerIdOfStream,
  workerStreamId,
  type WorkerEventOf,
  type WorkerEventType,
} from '../../schemas/worker-events.ts';
import {
  allowedWorkerEventTypes,
  decideWorker,
  foldWorker,
  isLive,
  startWorker,
  statusOf,
  workerMachine,
  workerStatuses,
  type WorkerRejection,
  type WorkerSnapshot,
  type WorkerStatus,
} from '../../actors/worker.machine.ts';

const T0 = Date.parse('2025-01-01T00:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

/** Builders validate with the catalog, so tests cannot drift from it. */
const build = <T extends WorkerEventType>(type: T, data: WorkerEventOf<T>['data'], by: string, occurredAt: string) =>
  WorkerEvent.parse({ type, data, metadata: { by, occurredAt } }) as WorkerEventOf<T>;

const W = 'w1';
const self = `worker:${W}`;
const ev = {
  started: (o: { at?: string; by?: string; capacity?: number } = {}) =>
    build(
      'WorkerStarted',
      { actions: ['core.noop', 'http.request'], runtimes: ['node'], capacity: o.capacity ?? 4, host: 'h1', pid: 42 },
      o.by ?? self,
      o.at ?? at(0),
    ),
  draining: (o: { at?: string; by?: string } = {}) => build('WorkerDraining', { reason: 'SIGTERM' }, o.by ?? self, o.at ?? at(10)),
  stopped: (o: { at?: string; by?: string } = {}) => build('WorkerStopped', { reason: 'drained' }, o.by ?? self, o.at ?? at(20)),
  lost: (o: { at?: string } = {}) =>
    build('WorkerLost', { lastHeartbeatAt: at(5), reason: 'no heartbeat for 30 s' }, 'executor', o.at ?? at(40)),
};
const eventOfType = (type: WorkerEventType): WorkerEvent =>
  ({ WorkerStarted: ev.started, WorkerDraining: ev.draining, WorkerStopped: ev.stopped, WorkerLost: ev.lost })[type]();

/** The escape hatch: an event the schema would refuse, to prove the machine refuses it on its own. */
const withBy = <E extends WorkerEvent>(event: E, by: string): E => ({ ...event, metadata: { ...event.metadata, by } }) as E;

const histories: Record<WorkerStatus, () => WorkerEvent[]> = {
  Starting: () => [],
  Active: () => [ev.started()],
  Draining: () => [ev.started(), ev.draining()],
  Stopped: () => [ev.started(), ev.draining(), ev.stopped()],
  Lost: () => [ev.started(), ev.lost()],
};
const reach = (status: WorkerStatus) => {
  const s = foldWorker(W, histories[status]());
  expect(statusOf(s)).toBe(status);
  return s;
};

function accept(snapshot: WorkerSnapshot, event: WorkerEvent): WorkerSnapshot {
  const decision = decideWorker(snapshot, event);
  if (!decision.ok) throw new Error(`expected ${event.type} to be accepted: ${decision.rejection}: ${decision.reason}`);
  return decision.snapshot;
}

/** Refused, classified, and nothing moved, neither through the decision nor through the machine's own guards. */
function expectRefused(snapshot: WorkerSnapshot, event: WorkerEvent, rejection: WorkerRejection, reason?: RegExp) {
  const before = structuredClone({ value: snapshot.value, context: snapshot.context });
  const decision = decideWorker(snapshot, event);
  expect(decision.ok).toBe(false);
  if (decision.ok) return;
  expect(decision.rejection).toBe(rejection);
  if (reason) expect(decision.reason).toMatch(reason);
  expect({ value: snapshot.value, context: snapshot.context }).toEqual(before);
  const [next] = transition(workerMachine, snapshot, event);
  expect(next.value).toBe(snapshot.value);
  expect(next.context).toBe(snapshot.context);
}

describe('worker event catalog', () => {
  it('names streams worker-<id>', () => {
    expect(workerStreamId('w-1.a')).toBe('worker-w-1.a');
    expect(workerIdOfStream('worker-w-1.a')).toBe('w-1.a');
    expect(workerIdOfStream('worker-')).toBeUndefined();
    expect(workerIdOfStream('execution-1')).toBeUndefined();
  });

  it('validates payloads and who may append each event', () => {
    const started = ev.started();
    expect(WorkerStarted.safeParse({ ...started, data: { ...started.data, capacity: 0 } }).success).toBe(false);
    expect(WorkerStarted.safeParse({ ...started, data: { ...started.data, actions: [] } }).success).toBe(false);
    expect(WorkerStarted.safeParse({ ...started, data: { ...started.data, pid: 1.5 } }).success).toBe(false);
    expect(WorkerStarted.safeParse({ ...started, data: { actions: ['a.b'], runtimes: ['node'], capacity: 1 } }).success).toBe(true);
    // The worker announces itself; the executor declares it lost; never the other way round.
    expect(() => ev.started({ by: 'executor' })).toThrow();
    expect(WorkerLost.safeParse(withBy(ev.lost(), self)).success).toBe(false);
    expect(() => build('WorkerDraining', { reason: '' }, self, at(1))).toThrow();
    expect(() => build('WorkerLost', { lastHeartbeatAt: 'yesterday', reason: 'x' }, 'executor', at(1))).toThrow();
    expect(workerEventTypes).toEqual(['WorkerStarted', 'WorkerDraining', 'WorkerStopped', 'WorkerLost']);
  });
});

describe('start', () => {
  it('begins in Starting with an empty context', () => {
    const s = startWorker(W);
    expect(statusOf(s)).toBe('Starting');
    expect(isLive(s)).toBe(false);
    expect(s.context).toMatchObject({ workerId: W, incarnation: 0, actions: [], capacity: 0, startedAt: null, updatedAt: null });
  });

  it('refuses an id no worker ref could carry', () => {
    expect(() => startWorker('')).toThrow(/invalid worker id/);
    expect(() => startWorker('has space')).toThrow(/invalid worker id "has space"/);
    expect(() => foldWorker('a/b', [])).toThrow(/invalid worker id/);
  });

  it('WorkerStarted makes it Active with what it announced', () => {
    const s = accept(startWorker(W), ev.started({ at: at(1) }));
    expect(statusOf(s)).toBe('Active');
    expect(isLive(s)).toBe(true);
    expect(s.context).toEqual({
      workerId: W,
      incarnation: 1,
      actions: ['core.noop', 'http.request'],
      runtimes: ['node'],
      capacity: 4,
      host: 'h1',
      pid: 42,
      startedAt: at(1),
      drainingSince: null,
      drainReason: null,
      stoppedAt: null,
      stopReason: null,
      lostAt: null,
      lostReason: null,
      lastHeartbeatAt: null,
      previousEnd: null,
      updatedAt: at(1),
    });
  });
});

describe('lifecycle', () => {
  it('drains, then stops', () => {
    const draining = accept(reach('Active'), ev.draining({ at: at(10) }));
    expect(statusOf(draining)).toBe('Draining');
    expect(isLive(draining)).toBe(true);
    expect(draining.context).toMatchObject({ drainingSince: at(10), drainReason: 'SIGTERM', updatedAt: at(10) });
    const stopped = accept(draining, ev.stopped({ at: at(20) }));
    expect(statusOf(stopped)).toBe('Stopped');
    expect(isLive(stopped)).toBe(false);
    expect(stopped.context).toMatchObject({ drainingSince: at(10), stoppedAt: at(20), stopReason: 'drained', updatedAt: at(20) });
  });

  it('may stop without draining when nothing is in flight', () => {
    expect(statusOf(accept(reach('Active'), ev.stopped()))).toBe('Stopped');
  });

  it.each(['Active', 'Draining'] as const)('is declared Lost from %s by the executor', (from) => {
    const s = accept(reach(from), ev.lost({ at: at(40) }));
    expect(statusOf(s)).toBe('Lost');
    expect(isLive(s)).toBe(false);
    expect(s.context).toMatchObject({ lostAt: at(40), lostReason: 'no heartbeat for 30 s', lastHeartbeatAt: at(5), updatedAt: at(40) });
  });

  it.each([
    ['Stopped', 'stopped'],
    ['Lost', 'lost'],
    ['Active', 'unannounced'],
    ['Draining', 'unannounced'],
  ] as const)('a WorkerStarted from %s opens a new incarnation (previous ended: %s)', (from, end) => {
    const s = accept(reach(from), ev.started({ at: at(100), capacity: 8 }));
    expect(statusOf(s)).toBe('Active');
    expect(s.context).toMatchObject({
      incarnation: 2,
      capacity: 8,
      startedAt: at(100),
      previousEnd: end,
      // The previous incarnation's drain, stop and loss belong to the history, not to this one.
      drainingSince: null,
      drainReason: null,
      stoppedAt: null,
      stopReason: null,
      lostAt: null,
      lostReason: null,
      lastHeartbeatAt: null,
    });
  });

  it('counts every incarnation', () => {
    const s = foldWorker(W, [ev.started(), ev.stopped(), ev.started(), ev.lost(), ev.started(), ev.started()]);
    expect(s.context).toMatchObject({ incarnation: 4, previousEnd: 'unannounced' });
  });
});

describe('every state × event type', () => {
  // The whole table, written out: a change to the machine must change this too.
  const legal: Record<WorkerStatus, WorkerEventType[]> = {
    Starting: ['WorkerStarted'],
    Active: ['WorkerStarted', 'WorkerDraining', 'WorkerStopped', 'WorkerLost'],
    Draining: ['WorkerStarted', 'WorkerStopped', 'WorkerLost'],
    Stopped: ['WorkerStarted'],
    Lost: ['WorkerStarted'],
  };

  it('covers every state', () => {
    expect([...workerStatuses].sort()).toEqual(Object.keys(legal).sort());
  });

  for (const status of Object.keys(legal) as WorkerStatus[]) {
    for (const type of workerEventTypes) {
      const ok = legal[status].includes(type);
      it(`${status} ${ok ? 'accepts' : 'refuses'} ${type}`, () => {
        const s = reach(status);
        if (ok) accept(s, eventOfType(type));
        else expectRefused(s, eventOfType(type), 'InvalidTransition', new RegExp(`^${type} is not allowed in state ${status}$`));
      });
    }
    it(`${status}: allowedWorkerEventTypes agrees`, () => {
      expect([...allowedWorkerEventTypes(reach(status))].sort()).toEqual([...legal[status]].sort());
    });
  }
});

describe('ownership', () => {
  it("only the worker itself may append its lifecycle events", () => {
    expectRefused(
      startWorker(W),
      ev.started({ by: 'worker:w2' }),
      'NotOwner',
      /^only worker:w1 may append WorkerStarted to worker w1's stream, not worker:w2$/,
    );
    expectRefused(reach('Active'), ev.draining({ by: 'worker:w2' }), 'NotOwner', /only worker:w1 may append WorkerDraining/);
    expectRefused(reach('Draining'), ev.stopped({ by: 'worker:w2' }), 'NotOwner');
    // A worker whose id merely starts with the owner's is someone else.
    expectRefused(reach('Active'), ev.stopped({ by: 'worker:w10' }), 'NotOwner');
  });

  it('the executor cannot announce the worker, even past the schema', () => {
    expectRefused(startWorker(W), withBy(ev.started(), 'executor'), 'NotOwner', /only worker:w1 may append WorkerStarted/);
    expectRefused(reach('Active'), withBy(ev.draining(), 'executor'), 'NotOwner');
  });

  it('only the executor may declare a worker lost, not the worker itself', () => {
    expectRefused(reach('Active'), withBy(ev.lost(), self), 'NotOwner', /^only executor may append WorkerLost to worker w1's stream, not worker:w1$/);
    expectRefused(reach('Draining'), withBy(ev.lost(), 'worker:w2'), 'NotOwner');
  });

  it('a state with no transition for the type refuses it whoever sends it', () => {
    expectRefused(reach('Stopped'), ev.draining({ by: 'worker:w2' }), 'InvalidTransition');
  });
});

describe('foldWorker', () => {
  it('folds an empty stream to Starting', () => {
    expect(statusOf(foldWorker(W, []))).toBe('Starting');
  });

  it('gives the same snapshot as deciding event by event', () => {
    const events = [ev.started(), ev.draining(), ev.stopped(), ev.started({ at: at(50) })];
    let s = startWorker(W);
    for (const e of events) s = accept(s, e);
    const folded = foldWorker(W, events);
    expect(folded.value).toBe(s.value);
    expect(folded.context).toEqual(s.context);
    // The context survives storage unchanged.
    expect(JSON.parse(JSON.stringify(folded.context))).toEqual(folded.context);
  });

  it('throws on a history the machine refuses, naming the event', () => {
    expect(() => foldWorker(W, [ev.started(), ev.stopped(), ev.draining()])).toThrow(
      /^event 2 \(WorkerDraining\) refused in state Stopped: InvalidTransition: WorkerDraining is not allowed in state Stopped$/,
    );
    expect(() => foldWorker(W, [ev.started({ by: 'worker:w2' })])).toThrow(/^event 0 \(WorkerStarted\) refused in state Starting: NotOwner/);
    expect(() => foldWorker('w2', [ev.started()])).toThrow(/NotOwner: only worker:w2 may append/);
  });
});
