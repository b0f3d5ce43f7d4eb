// Replay, pure: generated histories replay without divergence through the machine that wrote
// them; deliberately changed machines are caught with the right kind of divergence; machine
// version 1 stays importable; time-travel steps equal the fold of each prefix; forks are pure.
import { describe, expect, it } from 'vitest';
import { MACHINE_VERSION, foldExecution, statusOf } from '../../actors/execution.machine.ts';
import { UnknownMachineVersionError, executionMachineVersions, machineForVersion } from '../../actors/execution-machine-versions.ts';
import { asExecutionEvent, parseHistoryDocument, toHistoryDocument, type HistoryEvent } from '../../src/replay/history.ts';
import { InvalidForkEventError, forkExecution, stepAt, timeline } from '../../src/replay/inspect.ts';
import { CURRENT_MACHINE, RECORDED_MACHINES, describeDivergence, replayHistory, type ReplayTarget } from '../../src/replay/replay.ts';
import { at, ev, withBy } from '../support/execution-paths.ts';
import { randomHistory, seededRandom } from '../support/random-histories.ts';
import { editedMachine } from '../fixtures/machines/edit-machine.ts';
import { executionMachine as withoutCompletion } from '../fixtures/machines/without-completion.machine.ts';

const asHistory = (events: ReturnType<typeof ev.requested>[] | any[], version = MACHINE_VERSION): HistoryEvent[] =>
  events.map((e, revision) => ({ eventId: `e${revision}`, revision, type: e.type, data: e.data, metadata: { ...e.metadata, machineVersion: version }, recordedAt: e.metadata.occurredAt }));

const completed = () => asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.progressed('a'), ev.completed('a')]);
const running = () => asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1)]);
const candidate = (machine: any, label = 'fixture'): ReplayTarget => ({ kind: 'machine', machine, label });
/** What only version 7 writes: a handoff straight from Requested (no SchedulingStarted before it), or one recording the attempt limit. */
const v7Only = (history: HistoryEvent[]) =>
  history.some((e, i) => e.type === 'ExecutionHandedOff' && (history[i - 1]?.type !== 'SchedulingStarted' || 'maxAttempts' in (e.data as object)));
/** A SchedulingStarted recording the attempt limit (machine version 4 on). */
const recordsLimit = (e: HistoryEvent) => e.type === 'SchedulingStarted' && 'maxAttempts' in (e.data as object);

/**
 * Random walks as versions before 7 wrote them, every event marked as `version`'s: each walk holding
 * nothing that version could not write replays with no divergence against every target.
 */
function expectWalksReplayAs(version: string, seed: number, couldNotWrite: (e: HistoryEvent) => boolean, targets: ReplayTarget[] = [RECORDED_MACHINES]) {
  const random = seededRandom(seed);
  let checked = 0;
  for (let i = 0; i < 300; i++) {
    const history = randomHistory(random, { recordStateAfter: true, before7: true });
    expect(v7Only(history)).toBe(false);
    if (history.some(couldNotWrite)) continue;
    const marked = history.map((e) => ({ ...e, metadata: { ...e.metadata, machineVersion: version } }));
    for (const target of targets) expect(replayHistory(`h${i}`, marked, target).verdict.divergences).toEqual([]);
    checked++;
  }
  expect(checked).toBeGreaterThan(100);
}

describe('replay of generated histories', () => {
  it('replays 10,000 random histories through the current machine with no divergence', () => {
    const random = seededRandom(20261121);
    let events = 0;
    for (let i = 0; i < 10_000; i++) {
      const history = randomHistory(random, { recordStateAfter: i % 2 === 0 });
      events += history.length;
      for (const target of [CURRENT_MACHINE, RECORDED_MACHINES]) {
        const { verdict } = replayHistory(`h${i}`, history, target);
        if (verdict.divergences.length > 0) throw new Error(`history ${i} diverges: ${JSON.stringify(verdict.divergences)}\n${JSON.stringify(history)}`);
      }
    }
    expect(events).toBeGreaterThan(45_000); // the walks are long enough to mean something
  }, 60_000); // ~7 s on an idle 2-core machine; more while other test files share it

  it('replays 2,000 random histories with action versions (pinned and not) with no divergence', () => {
    const random = seededRandom(20261124);
    let versioned = 0;
    for (let i = 0; i < 2_000; i++) {
      const history = randomHistory(random, { recordStateAfter: i % 2 === 0, versions: true });
      if (history.some((e) => (e.data as { actionVersion?: number }).actionVersion !== undefined)) versioned++;
      for (const target of [CURRENT_MACHINE, RECORDED_MACHINES]) {
        const { verdict } = replayHistory(`h${i}`, history, target);
        if (verdict.divergences.length > 0) throw new Error(`history ${i} diverges: ${JSON.stringify(verdict.divergences)}\n${JSON.stringify(history)}`);
      }
    }
    expect(versioned).toBeGreaterThan(1_000);
  }, 60_000);

  it('a changed machine makes some of the same histories diverge (the check can fail)', () => {
    const random = seededRandom(7);
    const diverging = Array.from({ length: 1_000 }, (_, i) => replayHistory(`h${i}`, randomHistory(random, { recordStateAfter: true }), candidate(withoutCompletion))).filter((r) => r.verdict.divergences.length > 0);
    expect(diverging.length).toBeGreaterThan(10);
  });
});

describe('divergences', () => {
  it('an event the machine no longer handles: unhandled-event, with both states', () => {
    const { steps, verdict } = replayHistory('x', completed(), candidate(withoutCompletion));
    expect(verdict.divergences).toEqual([
      expect.objectContaining({ kind: 'unhandled-event', revision: 5, eventType: 'ExecutionCompleted', expected: 'Completed', actual: null }),
    ]);
    expect(verdict.divergences[0]!.reason).toMatch(/ExecutionCompleted is not handled in state Running/);
    expect(steps[5]).toMatchObject({ before: 'Running', after: null, expected: 'Completed' });
    expect(steps.slice(0, 5).every((s) => s.divergence === undefined && s.after === s.expected)).toBe(true);
  });

  it('an event that now leads elsewhere: different-state', () => {
    const toFailed = editedMachine((states) => {
      states.Running!.on!.ExecutionCompleted = { target: 'Failed' };
    });
    const { verdict } = replayHistory('x', completed(), candidate(toFailed));
    expect(verdict.divergences).toEqual([expect.objectContaining({ kind: 'different-state', revision: 5, expected: 'Completed', actual: 'Failed' })]);
  });

  it('a state that no longer exists: removed-state', () => {
    const noScheduling = editedMachine((states) => {
      delete states.Scheduling;
      states.Requested!.on!.SchedulingStarted = { target: 'Scheduled' };
    });
    const { verdict } = replayHistory('x', completed(), candidate(noScheduling));
    expect(verdict.divergences[0]).toMatchObject({ kind: 'removed-state', revision: 1, expected: 'Scheduling', actual: 'Scheduled' });
  });

  it('an execution in flight whose state no longer handles what must come next: stranded', () => {
    const { verdict } = replayHistory('x', running(), candidate(withoutCompletion));
    expect(verdict.inFlight).toBe(true);
    expect(verdict.divergences).toEqual([expect.objectContaining({ kind: 'stranded', expected: 'Running', reason: expect.stringMatching(/no longer handles ExecutionCompleted/) })]);
  });

  it('a recorded stateAfter that the machine does not reach is a divergence even with the same machine', () => {
    const history = completed();
    history[3]!.metadata.stateAfter = 'Scheduled';
    expect(replayHistory('x', history).verdict.divergences).toEqual([expect.objectContaining({ kind: 'different-state', revision: 3, expected: 'Scheduled', actual: 'Running' })]);
  });

  it('a history the recorded machine cannot read: unreadable', () => {
    const history = completed();
    history.splice(2, 1); // drop the handoff: ExecutionStarted in Scheduling
    history.forEach((e, i) => (e.revision = i));
    expect(replayHistory('x', history).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 2 });
  });
});

describe('machine versions', () => {
  const executorTimeout = withBy(ev.timedOut('a'), 'executor');

  it('keeps version 1 importable: it refuses the executor timeout that version 2 allows', () => {
    expect(executionMachineVersions.has('1')).toBe(true);
    const v1 = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), executorTimeout], '1');
    // Version 1 could not have written it, whatever it is replayed against.
    for (const target of [RECORDED_MACHINES, CURRENT_MACHINE]) {
      expect(replayHistory('x', v1, target).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 4, reason: expect.stringMatching(/ExecutionTimedOut is refused in state Running/) });
    }
    const ownTimeout = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.timedOut('a')], '1');
    expect(replayHistory('x', ownTimeout, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'TimedOut', divergences: [] });
  });

  it('folds a history written partly by v1 and partly by v2 with each event’s own version', () => {
    const mixed = [...asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1)], '1'), ...asHistory([executorTimeout], '2').map((e) => ({ ...e, revision: 4, eventId: 'e4' }))];
    const { verdict } = replayHistory('x', mixed, RECORDED_MACHINES);
    expect(verdict).toMatchObject({ recordedState: 'TimedOut', inFlight: false, divergences: [] });
    expect(timeline('x', mixed).at(-1)!.state).toBe('TimedOut');
  });

  it('keeps version 2 importable: it refuses the cancel request that version 3 allows, and reads every v2 history as before', () => {
    expect(executionMachineVersions.has('2')).toBe(true);
    const v2 = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.cancelRequested()], '2');
    expect(replayHistory('x', v2, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 4, reason: expect.stringMatching(/ExecutionCancelRequested is refused in state Running/) });
    const v3 = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.cancelRequested(), ev.reclaimed('a', 1, 'worker-lost'), ev.cancelled('executor')], '3');
    expect(replayHistory('x', v3, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Cancelled', divergences: [] });
    // A v2 history holding everything else v2 could write replays identically under v3.
    expectWalksReplayAs('2', 2, (e) => e.type === 'ExecutionCancelRequested' || e.type === 'ExecutionTagged' || recordsLimit(e));
  });

  it('keeps version 3 importable: it refuses the recorded attempt limit and the restart reclaim that version 4 allows, and reads every v3 history as before', () => {
    expect(executionMachineVersions.has('3')).toBe(true);
    const limit = asHistory([ev.requested(), ev.schedulingStarted({ maxAttempts: 1 })], '3');
    expect(replayHistory('x', limit, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 1, reason: expect.stringMatching(/SchedulingStarted is refused in state Requested/) });
    const restart = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.reclaimed('a', 1, 'worker-restarted')], '3');
    expect(replayHistory('x', restart, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 4 });
    const v4 = asHistory([ev.requested({ maxAttempts: 3, maxAttemptsIsDefault: true }), ev.schedulingStarted({ maxAttempts: 1 }), ev.handedOff('a', 1), ev.started('a', 1), ev.failed('a', true)], '4');
    expect(replayHistory('x', v4, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Failed', divergences: [] });
    // A v3 history holding everything else v3 could write replays identically under v4.
    expectWalksReplayAs('3', 3, (e) => e.type === 'ExecutionTagged' || recordsLimit(e));
  });

  it('keeps version 4 importable: it refuses the tags version 5 adds while running, and reads every v4 history as before', () => {
    expect(executionMachineVersions.has('4')).toBe(true);
    const tagged = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.tagged('a')], '4');
    expect(replayHistory('x', tagged, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 4, reason: expect.stringMatching(/ExecutionTagged is refused in state Running/) });
    const v5 = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.tagged('a'), ev.tagged('a', { region: 'eu' }), ev.completed('a')], '5');
    expect(replayHistory('x', v5, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    expect(timeline('x', v5).at(-1)!.context).toMatchObject({ tags: { customer: 'c-42', region: 'eu' } });
    // A v4 history holding everything else v4 could write replays identically under v5.
    expectWalksReplayAs('4', 4, (e) => e.type === 'ExecutionTagged');
  });

  it('keeps version 5 importable: it refuses a handoff or start naming an action version, and every v5 history replays with no divergence under v5 and v6', () => {
    expect(executionMachineVersions.has('5')).toBe(true);
    const versioned = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1, { actionVersion: 2 })], '5');
    expect(replayHistory('x', versioned, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 2, reason: expect.stringMatching(/ExecutionHandedOff is refused in state Scheduling/) });
    const v5 = asHistory([ev.requested({ actionVersion: 2 }), ev.schedulingStarted(), ev.handedOff('a', 1, { actionVersion: 2 }), ev.started('a', 1, { actionVersion: 2 }), ev.completed('a')], '6');
    expect(replayHistory('x', v5, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    // No v5 history names a version (none could), so the version rules never fire on one.
    expectWalksReplayAs('5', 5, () => false, [RECORDED_MACHINES, candidate(executionMachineVersions.get('6'), 'version 6')]);
  });

  it('keeps version 6 importable: it refuses a handoff straight from Requested or recording the attempt limit, and reads every v6 history as before', () => {
    expect(executionMachineVersions.has('6')).toBe(true);
    const direct = asHistory([ev.requested(), ev.handedOff('a', 1)], '6');
    expect(replayHistory('x', direct, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 1, reason: expect.stringMatching(/ExecutionHandedOff is refused in state Requested/) });
    const limit = asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1, { maxAttempts: 1 })], '6');
    expect(replayHistory('x', limit, RECORDED_MACHINES).verdict.divergences[0]).toMatchObject({ kind: 'unreadable', revision: 2, reason: expect.stringMatching(/ExecutionHandedOff is refused in state Scheduling/) });
    // Version 7 writes both, and a history can hold v6 events then v7 ones (an upgrade mid-run).
    const v7 = asHistory([ev.requested({ maxAttempts: 3 }), ev.handedOff('a', 1, { maxAttempts: 2 }), ev.started('a', 1), ev.failed('a', true), ev.retryScheduled(2), ev.handedOff('b', 2), ev.started('b', 2), ev.failed('b', true)], '7');
    expect(replayHistory('x', v7, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Failed', divergences: [] });
    expect(timeline('x', v7).at(-1)!.context).toMatchObject({ maxAttempts: 2, attempt: 2 });
    const upgraded = [...asHistory([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ev.failed('a', true)], '6'), ...asHistory([ev.retryScheduled(2), ev.handedOff('b', 2), ev.started('b', 2), ev.completed('b')], '7').map((e, i) => ({ ...e, revision: 5 + i, eventId: `e${5 + i}` }))];
    expect(replayHistory('x', upgraded, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    // A v6 history holding everything else v6 could write replays identically under v7 (v8 hands an unstarted return off again: see below).
    expectWalksReplayAs('6', 6, () => false, [RECORDED_MACHINES, candidate(executionMachineVersions.get('7'), 'version 7')]);
    // And the walks of the current machine do go the version 7 way (what the 10,000 above replay).
    const random = seededRandom(7);
    const current = Array.from({ length: 100 }, () => randomHistory(random, { recordStateAfter: true }));
    expect(current.filter(v7Only).length).toBeGreaterThan(50);
  });

  it('keeps version 7 importable: an unstarted handoff that came back spent its attempt there, and v7 histories replay as before; v8 hands it off again', () => {
    expect(executionMachineVersions.has('7')).toBe(true);
    const v7 = asHistory([ev.requested({ maxAttempts: 3 }), ev.handedOff('a', 1), ev.reclaimed('a', 1, 'worker-lost'), ev.retryScheduled(2), ev.handedOff('b', 2), ev.started('b', 2), ev.completed('b')], '7');
    expect(replayHistory('x', v7, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    expect(timeline('x', v7).at(-1)!.context).toMatchObject({ attempt: 2 });
    // The current machine folds a return version 7 wrote as version 7 did: every stored history still folds.
    expect(replayHistory('x', v7, CURRENT_MACHINE).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    expect(foldExecution(v7.map(asExecutionEvent)).context).toMatchObject({ attempt: 2 });
    const v8 = asHistory([ev.requested({ maxAttempts: 3 }), ev.handedOff('a', 1), ev.reclaimed('a', 1, 'worker-lost'), ev.handedOff('b', 1), ev.started('b', 1), ev.completed('b')], MACHINE_VERSION);
    expect(replayHistory('x', v8, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
    expect(timeline('x', v8).at(-1)!.context).toMatchObject({ attempt: 1 });
    // An upgrade mid-attempt: reclaimed under v7 (a retry pending), decided under v8 as v7 left it.
    const upgraded = [...asHistory([ev.requested({ maxAttempts: 3 }), ev.handedOff('a', 1), ev.reclaimed('a', 1, 'worker-lost')], '7'), ...asHistory([ev.retryScheduled(2), ev.handedOff('b', 2), ev.started('b', 2), ev.completed('b')], MACHINE_VERSION).map((e, i) => ({ ...e, revision: 3 + i, eventId: `e${3 + i}` }))];
    expect(replayHistory('x', upgraded, RECORDED_MACHINES).verdict).toMatchObject({ recordedState: 'Completed', divergences: [] });
  });

  it('names an unknown version: a newer one as written by a newer Baton, any other as one this build does not have', () => {
    expect(() => machineForVersion('99')).toThrow(UnknownMachineVersionError);
    expect(() => machineForVersion('99')).toThrow(`written by execution machine version 99; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`);
    expect(() => machineForVersion('7-candidate')).toThrow(/written by execution machine version "7-candidate", which this build of Baton does not have \(it knows versions 1–/);
  });
});

describe('a history written by a machine version this build does not have', () => {
  // What a newer Baton would write: the same events, naming its own version from revision 2 on.
  const newerFrom = (history: HistoryEvent[], revision: number, version = String(Number(MACHINE_VERSION) + 1)) =>
    history.map((e) => (e.revision >= revision ? { ...e, metadata: { ...e.metadata, machineVersion: version, stateAfter: statusOf(foldExecution(history.slice(0, e.revision + 1).map(asExecutionEvent))) } } : e));
  const newer = String(Number(MACHINE_VERSION) + 1);

  it('is unreadable from its first such event against every machine, saying which version wrote it: not an unhandled event', () => {
    for (const target of [CURRENT_MACHINE, RECORDED_MACHINES, candidate(withoutCompletion)]) {
      const { steps, verdict } = replayHistory('x', newerFrom(completed(), 2), target);
      expect(verdict.divergences).toEqual([expect.objectContaining({ kind: 'unreadable', revision: 2, eventType: 'ExecutionHandedOff', actual: null })]);
      const [d] = verdict.divergences;
      expect(d!.reason).toBe(`written by execution machine version ${newer}; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`);
      expect(describeDivergence(d!)).toBe(`x @2 ExecutionHandedOff: unreadable: ${d!.reason}`);
      expect(steps[2]).toMatchObject({ before: 'Scheduling', after: null, machineVersion: newer, divergence: d });
      expect(steps.slice(3).every((s) => s.before === null && s.after === null)).toBe(true);
      // Completed, as its last event recorded: finished, not in flight (the deploy gate passes it over).
      expect(verdict).toMatchObject({ recordedState: 'Completed', inFlight: false });
    }
  });

  it('from its first event too, still known to be finished', () => {
    const { verdict } = replayHistory('x', newerFrom(completed(), 0), RECORDED_MACHINES);
    expect(verdict).toMatchObject({ recordedState: 'Completed', inFlight: false, divergences: [expect.objectContaining({ kind: 'unreadable', revision: 0 })] });
  });

  it('time-travel refuses it naming the execution, the event and the version, not as a refused transition', () => {
    const history = newerFrom(completed(), 3);
    expect(() => timeline('x', history)).toThrow(UnknownMachineVersionError);
    expect(() => timeline('x', history)).toThrow(
      `execution x: the event at revision 3 (ExecutionStarted) was written by execution machine version ${newer}; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`,
    );
  });
});

describe('time-travel', () => {
  it('the step at every revision of a long execution equals the fold of that prefix', () => {
    const progress = (w: string, n: number, t0: number) => Array.from({ length: n }, (_, i) => ev.progressed(w, { step: i }, { at: at(t0 + i) }));
    const history = asHistory([
      ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1), ev.started('a', 1), ...progress('a', 150, 10),
      ev.failed('a', true, { at: at(200) }), ev.retryScheduled(2, { at: at(201) }), ev.schedulingStarted({ at: at(202) }), ev.handedOff('b', 2, { at: at(203) }),
      ev.started('b', 2, { at: at(204) }), ...progress('b', 100, 210), ev.completed('b', { ok: 1 }, { at: at(400) }),
    ]);
    expect(history.length).toBe(260);
    const steps = timeline('x', history);
    for (const e of history) {
      const prefix = foldExecution(history.slice(0, e.revision + 1).map(asExecutionEvent));
      const step = stepAt(steps, { revision: e.revision })!;
      expect(step.state).toBe(statusOf(prefix));
      expect(step.context).toEqual(prefix.context);
    }
  });

  it('finds the state at an instant, and says what changed', () => {
    const steps = timeline('x', completed());
    expect(stepAt(steps, { at: new Date(at(3)) })!.state).toBe('Running');
    expect(stepAt(steps, { at: new Date(at(-1)) })).toBeUndefined();
    expect(steps[3]!.changed).toEqual(expect.arrayContaining(['startedAt', 'deadline']));
    expect(() => stepAt(steps, { revision: 9 })).toThrow(/revision: must be a revision from 0 to 5/);
  });
});

describe('what-if forks', () => {
  it('continues a prefix through the machine and reports refusals without throwing', () => {
    const steps = timeline('x', completed());
    const failInstead = forkExecution(steps, 4, [{ type: 'ExecutionFailed', data: { error: { message: 'boom' }, retryable: false } }]);
    expect(failInstead).toMatchObject({ ok: true, finalState: 'Failed', steps: [{ type: 'ExecutionFailed', by: 'worker:a', before: 'Running', after: 'Failed' }] });
    const refused = forkExecution(steps, 1, [{ type: 'ExecutionCompleted', data: { result: 1 }, by: 'worker:a' }]);
    expect(refused).toMatchObject({ ok: false, finalState: 'Scheduling', steps: [{ after: null, refused: expect.stringMatching(/not allowed in state Scheduling/) }] });
  });

  it('sends a cancel request or a reclaim from the executor by default, whoever holds the baton (the owner would be refused)', () => {
    const steps = timeline('x', completed());
    const asked = forkExecution(steps, 4, [{ type: 'ExecutionCancelRequested', data: { reason: 'stop' } }]);
    expect(asked).toMatchObject({ ok: true, steps: [{ type: 'ExecutionCancelRequested', by: 'executor', before: 'Running', after: 'Running' }] });
    const reclaimed = forkExecution(steps, 4, [{ type: 'OwnershipReclaimed', data: { reason: 'manual', workerId: 'a', attempt: 1 } }]);
    expect(reclaimed).toMatchObject({ ok: true, steps: [{ by: 'executor', after: 'Requested' }] });
  });

  it('names the field of a malformed fork event', () => {
    const steps = timeline('x', completed());
    expect(() => forkExecution(steps, 4, [{ type: 'ExecutionFailed', data: { retryable: false } }])).toThrow(/error/);
  });

  it('counts fork events from 1 in its messages, as the what-if table (#) and its "would not take event N" do', () => {
    const steps = timeline('x', completed());
    const progressed = { type: 'ExecutionProgressed', data: {} };
    // The second event is event 2 whether the catalog refuses it or the machine does.
    const malformed = () => forkExecution(steps, 3, [progressed, { type: 'ExecutionFailed', data: { retryable: false } }]);
    expect(malformed).toThrow(/^invalid fork event 2 \(ExecutionFailed\): data\.error: /);
    expect(malformed).toThrow(expect.objectContaining({ index: 1, eventType: 'ExecutionFailed' }) as InvalidForkEventError);
    expect(() => forkExecution(steps, 3, [progressed, { type: 'NoSuchEvent' }])).toThrow(/^invalid fork event 2 \(NoSuchEvent\): type: /);
    const refused = forkExecution(steps, 3, [progressed, { type: 'ExecutionStarted', data: { attempt: 1 } }]);
    expect(refused.steps).toHaveLength(2); // the CLI's "would not take event 2"
  });

  it('refuses fields the event does not have, at any depth, rather than trying the event without them; a JSON result keeps its own', () => {
    const steps = timeline('x', completed());
    const fork = (input: object) => () => forkExecution(steps, 4, [input as { type: string }]);
    expect(fork({ type: 'ExecutionCompleted', data: { result: 1, bogus: 2 }, bogus: 2 })).toThrow('invalid fork event 1 (ExecutionCompleted): bogus: unknown field; data.bogus: unknown field');
    expect(fork({ type: 'ExecutionFailed', data: { error: { message: 'boom', kind: 'x' }, retryable: false } })).toThrow('data.error.kind: unknown field');
    expect(fork({ type: 'ExecutionCompleted', data: { result: { anything: { goes: [1, { here: true }] } } } })()).toMatchObject({ ok: true, finalState: 'Completed' });
  });
});

describe('history documents', () => {
  it('round-trips, and refuses gaps and bad fields by name', () => {
    const doc = JSON.parse(JSON.stringify(toHistoryDocument('0192f3a4-5b6c-7d8e-9f01-23456789abcd', completed())));
    expect(parseHistoryDocument(doc).events).toHaveLength(6);
    const gap = { ...doc, events: doc.events.filter((_: unknown, i: number) => i !== 2) };
    expect(() => parseHistoryDocument(gap)).toThrow(/events\.2\.revision: expected revision 2/);
    const twice = structuredClone(doc);
    twice.events[3].eventId = twice.events[1].eventId.toUpperCase();
    expect(() => parseHistoryDocument(twice)).toThrow(/events\.3\.eventId: the same event id as events\.1 \(.*\): an event id is stored once/);
    expect(() => parseHistoryDocument({ ...doc, format: 'other' })).toThrow(/format/);
    // The file edited by hand, its first event changed.
    const withFirst = (change: (e: Record<string, any>) => void) => {
      const copy = structuredClone(doc);
      change(copy.events[0]);
      return copy;
    };
    expect(() => parseHistoryDocument(withFirst((e) => (e.data = null)))).toThrow(/events\.0\.data: /);
    expect(() => parseHistoryDocument(withFirst((e) => delete e.metadata.by))).toThrow(/events\.0\.metadata\.by: /);
    expect(() => parseHistoryDocument(withFirst((e) => (e.metadata.machineVersion = 7)))).toThrow(/events\.0\.metadata\.machineVersion: /);
    expect(() => parseHistoryDocument({ ...doc, executionId: 'nope' })).toThrow(/executionId: must be an execution id/);
  });
});

describe('history files', () => {
  it('refuses one larger than Baton reads, saying so (a sparse file: nothing is written to disk)', async () => {
    const { mkdtemp, open, rm } = await import('node:fs/promises');
    const os = await import('node:os');
    const path = await import('node:path');
    const { MAX_HISTORY_FILE_BYTES, readHistoryFile } = await import('../../src/replay/history.ts');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'baton-huge-history-'));
    try {
      const file = path.join(dir, 'huge.json');
      const handle = await open(file, 'w');
      await handle.truncate(MAX_HISTORY_FILE_BYTES + 1);
      await handle.close();
      await expect(readHistoryFile(file)).rejects.toThrow(/^history file .*huge\.json is 500 MiB: larger than Baton reads \(at most 500 MiB\)$/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
