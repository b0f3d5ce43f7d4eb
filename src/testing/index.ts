// Test helpers for Baton's users. Turn a history exported from any environment (`baton export
// <id> > test/histories/bug-123.json`) into a regression test in three lines:
//
//   import { test } from 'vitest';
//   import { expectHistoryReplays } from '@baton-run/baton/testing';
//   test('bug 123 still replays', () => expectHistoryReplays('test/histories/bug-123.json'));
//
// It replays the history through the current execution machine (or `against`: 'recorded', a
// module path, or a machine) and throws, listing every divergence, if any event is refused or
// now leads to a different state than was recorded. No database is needed.
import type { AnyStateMachine } from 'xstate';
import { readHistoryFile } from '../replay/history.ts';
import { describeDivergence, replayHistory, type ReplayStep, type ReplayTarget } from '../replay/replay.ts';
import { loadReplayTarget } from '../replay/replay-target.ts';
import { InvalidInputError } from '../input/errors.ts';
import { unknownNameMessage } from '../input/nearest.ts';

export interface ExpectHistoryOptions {
  /** `current` (default), `recorded`, a module path exporting `executionMachine`, or a machine. */
  against?: string | AnyStateMachine;
  /** Also require the history to end in this state, e.g. 'Completed'. */
  finalState?: string;
}

const OPTIONS = ['against', 'finalState'] as const;

export class HistoryDivergesError extends Error {
  constructor(message: string, readonly steps: ReplayStep[]) {
    super(message);
    this.name = 'HistoryDivergesError';
  }
}

/** Replays the exported history in `file`; resolves with its steps, or throws describing each divergence. */
export async function expectHistoryReplays(file: string, o: ExpectHistoryOptions = {}): Promise<ReplayStep[]> {
  if (typeof file !== 'string' || file === '') throw new InvalidInputError([{ path: 'file', message: 'must be the path of an exported history (`baton export <id> > file.json`)' }]);
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new InvalidInputError([{ path: 'options', message: 'must be an object like { against: \'recorded\', finalState: \'Completed\' }' }]);
  // A misspelt option (`finalstate`) would make the test pass without checking what it names.
  const unknown = Object.keys(o).filter((k) => !(OPTIONS as readonly string[]).includes(k));
  if (unknown.length > 0) throw new InvalidInputError(unknown.map((k) => ({ path: `options.${k}`, message: unknownNameMessage('option', k, OPTIONS) })));
  if (o.finalState !== undefined && typeof o.finalState !== 'string') throw new InvalidInputError([{ path: 'options.finalState', message: "must be a state's name, e.g. 'Completed'" }]);
  // A machine is an object with a root state node (xstate's createMachine); anything else is a mistake, not a divergence.
  const isMachine = (v: unknown): v is AnyStateMachine => typeof v === 'object' && v !== null && typeof (v as { root?: unknown }).root === 'object' && (v as { root?: unknown }).root !== null;
  if (o.against !== undefined && typeof o.against !== 'string' && !isMachine(o.against)) {
    throw new InvalidInputError([{ path: 'options.against', message: "must be 'current', 'recorded', a module path exporting executionMachine, or a machine (xstate's createMachine)" }]);
  }
  const doc = await readHistoryFile(file);
  const target: ReplayTarget =
    o.against !== undefined && typeof o.against !== 'string' ? { kind: 'machine', machine: o.against, label: 'the given machine' } : await loadReplayTarget(o.against ?? 'current', 'options.against:');
  const { steps, verdict } = replayHistory(doc.executionId, doc.events, target);
  const problems = verdict.divergences.map(describeDivergence);
  const last = steps.at(-1);
  if (o.finalState !== undefined && problems.length === 0 && last?.after !== o.finalState) {
    problems.push(`the history ends in ${last?.after ?? '(nothing)'}, not ${o.finalState}`);
  }
  if (problems.length > 0) throw new HistoryDivergesError(`history ${file} (${steps.length} events) does not replay:\n  ${problems.join('\n  ')}`, steps);
  return steps;
}
