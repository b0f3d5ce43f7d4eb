// The execution machine's action-version rules (machine version 5), over generated paths: a
// handoff of a pinned execution names the pin, and a start names the version its attempt was
// handed off for (absent everywhere means version 1), so a retry stays on the pinned version
// and no worker runs a version it was not handed.
import { getShortestPaths } from '@xstate/graph';
import { describe, expect, it } from 'vitest';
import { decideExecution, executionMachine, foldExecution, statusOf, type ExecutionSnapshot } from '../../actors/execution.machine.ts';
import type { ExecutionEvent, ExecutionEventOf } from '../../schemas/events.ts';
import { ev, oneUnstartedReturn } from '../support/execution-paths.ts';

const VERSIONS = [undefined, 1, 2, 3] as const;

/** Handoffs and starts of attempts 1 and 2 at every version (and none), plus the rest of a retry. */
function alphabet(requested: ExecutionEventOf<'ExecutionRequested'>): ExecutionEvent[] {
  return [
    requested,
    ev.schedulingStarted(),
    ...[1, 2].flatMap((attempt) => VERSIONS.flatMap((actionVersion) => [ev.handedOff('a', attempt, { actionVersion }), ev.started('a', attempt, { actionVersion })])),
    ev.failed('a', true),
    ev.completed('a'),
    ev.reclaimed('a', 1),
    ev.reclaimed('a', 2),
    ev.retryScheduled(2),
  ];
}

function paths(requested: ExecutionEventOf<'ExecutionRequested'>) {
  return getShortestPaths(executionMachine, {
    input: requested,
    events: oneUnstartedReturn(alphabet(requested)),
    serializeState: (s) => JSON.stringify({ value: s.value, context: s.context }),
    serializeEvent: (e) => JSON.stringify(e),
    limit: 50_000,
  }).map((p) => ({ events: [requested, ...p.steps.slice(1).map((s) => s.event as ExecutionEvent)], state: p.state }));
}

const versionOf = (v: number | undefined) => v ?? 1;

/** Every handoff in the path, and the version each start ran, checked against the rules. */
function checkPath(events: ExecutionEvent[], pin: number | undefined): void {
  let handed: number | undefined;
  for (const e of events) {
    if (e.type === 'ExecutionHandedOff') {
      handed = versionOf(e.data.actionVersion);
      if (pin !== undefined) expect(handed).toBe(pin);
    }
    if (e.type === 'ExecutionStarted') expect(versionOf(e.data.actionVersion)).toBe(handed);
  }
}

describe('action versions in the execution machine (generated paths)', () => {
  for (const pin of [undefined, 2] as const) {
    describe(pin === undefined ? 'unpinned' : `pinned to version ${pin}`, () => {
      const requested = ev.requested(pin === undefined ? {} : { actionVersion: pin });
      const generated = paths(requested);

      it('reach a completion on the second attempt, so retries are covered', () => {
        expect(generated.length).toBeGreaterThan(20);
        expect(generated.some((p) => statusOf(p.state as ExecutionSnapshot) === 'Completed' && p.state.context.attempt === 2)).toBe(true);
      });

      it('hand off only the pinned version, and start only the version handed off, on every attempt', () => {
        for (const p of generated) checkPath(p.events, pin);
        const handoffs = new Set(generated.flatMap((p) => p.events.filter((e) => e.type === 'ExecutionHandedOff').map((e) => versionOf((e as ExecutionEventOf<'ExecutionHandedOff'>).data.actionVersion))));
        expect([...handoffs].sort()).toEqual(pin === undefined ? [1, 2, 3] : [pin]);
      });

      it('fold to the state and context the traversal reached, also after a JSON round trip', () => {
        for (const p of generated) {
          const folded = foldExecution(JSON.parse(JSON.stringify(p.events)) as ExecutionEvent[]);
          expect(statusOf(folded)).toBe(p.state.value);
          expect(JSON.parse(JSON.stringify(folded.context))).toEqual(JSON.parse(JSON.stringify(p.state.context)));
        }
      });

      it('refuse, naming the versions, every handoff off the pin and every start off its handoff', () => {
        for (const p of generated) {
          const s = p.state as ExecutionSnapshot;
          for (const e of alphabet(requested)) {
            const d = decideExecution(s, e);
            if (e.type === 'ExecutionHandedOff' && statusOf(s) === 'Scheduling' && e.data.attempt === s.context.attempt && pin !== undefined && versionOf(e.data.actionVersion) !== pin) {
              expect(d).toMatchObject({ ok: false, rejection: 'InvalidTransition', reason: expect.stringMatching(new RegExp(`names action version \\d but the execution is pinned to version ${pin}`)) });
            }
            if (e.type === 'ExecutionStarted' && statusOf(s) === 'Scheduled' && e.data.attempt === s.context.attempt && versionOf(e.data.actionVersion) !== versionOf(s.context.actionVersion)) {
              expect(d).toMatchObject({ ok: false, rejection: 'InvalidTransition', reason: expect.stringMatching(/ExecutionStarted runs action version \d but attempt \d was handed off for version \d/) });
            }
          }
        }
      });
    });
  }

  it('records the pin, and each attempt\'s version, in the context', () => {
    const s = foldExecution([ev.requested({ actionVersion: 2 }), ev.schedulingStarted(), ev.handedOff('a', 1, { actionVersion: 2 })]);
    expect(s.context).toMatchObject({ pinnedVersion: 2, actionVersion: 2 });
    const unpinned = foldExecution([ev.requested(), ev.schedulingStarted(), ev.handedOff('a', 1, { actionVersion: 3 }), ev.started('a', 1, { actionVersion: 3 }), ev.failed('a', true), ev.retryScheduled(2), ev.schedulingStarted(), ev.handedOff('a', 2)]);
    expect(unpinned.context.pinnedVersion).toBeUndefined();
    expect(unpinned.context.actionVersion).toBeUndefined(); // the retry went to a worker of version 1
  });
});
