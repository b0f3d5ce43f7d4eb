// Random walks through the execution machine: seeded, so a failure names a reproducible history.
// Each walk takes a random event the machine accepts from the path alphabet (plus the executor's
// start-to-close timeout and worker-lost reclaims) until a final state or its length. Events
// that end the execution are picked only one time in ten, so walks go through retries and
// reclaims instead of mostly stopping at the first cancel.
import { getInitialSnapshot, transition } from 'xstate';
import { MACHINE_VERSION, executionMachine, startExecution, statusOf } from '../../actors/execution.machine.ts';
import { executionMachineVersions } from '../../actors/execution-machine-versions.ts';
import type { ExecutionEvent } from '../../schemas/events.ts';
import type { HistoryEvent } from '../../src/replay/history.ts';
import { at, ev, PATH_MAX_ATTEMPTS, pathAlphabet, withBy } from './execution-paths.ts';

/** mulberry32: a tiny, good-enough seeded generator for test data. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const alphabet = (): ExecutionEvent[] => [
  ...pathAlphabet().filter((e) => e.type !== 'ExecutionRequested'),
  withBy(ev.timedOut('a'), 'executor'),
  ev.reclaimed('a', 1, 'worker-lost'),
  ev.reclaimed('b', 2, 'worker-lost'),
];

export interface RandomHistoryOptions {
  /** Record metadata.stateAfter as the runtime does (else replay derives it from the version). */
  recordStateAfter: boolean;
  maxLength?: number;
  /** Action versions too (machine version 5): half the requests pin version 2, and handoffs and starts name versions 1 to 3. */
  versions?: boolean;
  /** As machine versions before 7 wrote them: a SchedulingStarted before every handoff, no handoff recording the attempt limit, and (as before 8) an attempt spent by an unstarted return. */
  before7?: boolean;
}

/** Handoffs and starts naming an action version, for walks with `versions`. */
const versioned = (): ExecutionEvent[] =>
  (['a', 'b'] as const).flatMap((w) => [1, 2].flatMap((n) => [1, 2, 3].flatMap((actionVersion) => [ev.handedOff(w, n, { actionVersion }), ev.started(w, n, { actionVersion })])));

const ENDING = new Set<string>(['ExecutionCompleted', 'ExecutionFailed', 'ExecutionCancelled', 'ExecutionTimedOut', 'ExecutionAbandoned']);

/** One random valid history as a stored stream would hold it (the current machine version). */
export function randomHistory(random: () => number, o: RandomHistoryOptions): HistoryEvent[] {
  const byType = new Map<string, ExecutionEvent[]>();
  for (const e of [...alphabet(), ...(o.versions ? versioned() : [])]) byType.set(e.type, [...(byType.get(e.type) ?? []), e]);
  const first = ev.requested({ maxAttempts: PATH_MAX_ATTEMPTS, ...(o.versions && random() < 0.5 && { actionVersion: 2 }) });
  // Before machine version 8 an unstarted handoff that came back spent its attempt: walks as older versions wrote them take version 7's rules.
  const machine = o.before7 ? executionMachineVersions.get('7')! : executionMachine;
  let snapshot = (o.before7 ? getInitialSnapshot(machine, first) : startExecution(first)) as ReturnType<typeof startExecution>;
  const picked: { event: ExecutionEvent; state: string }[] = [{ event: first, state: statusOf(snapshot) }];
  const length = 1 + Math.floor(random() * (o.maxLength ?? 30));
  while (picked.length < length && snapshot.status !== 'done') {
    const current = snapshot;
    const options = current._nodes
      .flatMap((node) => node.ownEvents)
      .flatMap((type) => byType.get(type) ?? [])
      .filter((e) => current.can(e) && !(o.before7 && e.type === 'ExecutionHandedOff' && (statusOf(current) === 'Requested' || e.data.maxAttempts !== undefined)));
    if (options.length === 0) break;
    const ending = options.filter((e) => ENDING.has(e.type));
    const going = options.filter((e) => !ENDING.has(e.type));
    const pool = going.length > 0 && (ending.length === 0 || random() >= 0.1) ? going : ending;
    const event = pool[Math.floor(random() * pool.length)]!;
    [snapshot] = transition(machine, snapshot, event);
    picked.push({ event, state: statusOf(snapshot) });
  }
  return picked.map(({ event, state }, revision) => ({
    eventId: `e${revision}`,
    revision,
    type: event.type,
    data: event.data,
    metadata: { ...event.metadata, machineVersion: MACHINE_VERSION, ...(o.recordStateAfter && { stateAfter: state }) },
    recordedAt: event.metadata.occurredAt ?? at(0),
  }));
}
