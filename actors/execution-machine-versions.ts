// Every execution machine version the store may still hold histories for, by the version string
// each event records in metadata.machineVersion. Replay uses them to fold a history with the
// rules it was written under. A version stays here for as long as any stored event names it.
//
// When MACHINE_VERSION moves on, freeze the outgoing machine first: copy its definition here (or
// express it, as v1 is, as the new machine with the old rule put back) and add a test that a
// history it wrote still folds.
import type { AnyStateMachine } from 'xstate';
import { EXECUTOR, MACHINE_VERSION, executionMachine, mayAppend, type ExecutionContext } from './execution.machine.ts';
import type { ExecutionEvent } from '../schemas/events.ts';
import { BatonError } from '../src/errors.ts';

/**
 * Version 6 is version 7 with SchedulingStarted before every handoff: a handoff came only from
 * Scheduling (the `handsOffFromRequested` guard says no) and never carried the attempt limit.
 */
function mayAppendV6(context: ExecutionContext, event: ExecutionEvent): boolean {
  if (event.type === 'ExecutionHandedOff' && event.data.maxAttempts !== undefined) return false;
  return mayAppend(context, event);
}

/**
 * Version 5 is version 6 without action versions: no handoff or start named one (and no request
 * pinned one), so every attempt ran version 1 and the version rules never fire. Every other rule
 * is the same.
 */
function mayAppendV5(context: ExecutionContext, event: ExecutionEvent): boolean {
  if ((event.type === 'ExecutionHandedOff' || event.type === 'ExecutionStarted') && event.data.actionVersion !== undefined) return false;
  return mayAppendV6(context, event);
}

/** Version 4 is version 5 without tags added while running: nobody could write ExecutionTagged. */
function mayAppendV4(context: ExecutionContext, event: ExecutionEvent): boolean {
  return event.type !== 'ExecutionTagged' && mayAppendV5(context, event);
}

/**
 * Version 3 is version 4 without recorded attempt limits and restart reclaims: nobody could write
 * SchedulingStarted.maxAttempts or OwnershipReclaimed {reason: worker-restarted}, and every
 * ExecutionRequested named its maxAttempts as the submission's (so `submittedMaxAttempts` always
 * equals it, and the limit never moves). Every other rule is the same.
 */
function mayAppendV3(context: ExecutionContext, event: ExecutionEvent): boolean {
  if (event.type === 'SchedulingStarted' && event.data.maxAttempts !== undefined) return false;
  if (event.type === 'OwnershipReclaimed' && event.data.reason === 'worker-restarted') return false;
  return mayAppendV4(context, event);
}

/**
 * Version 2 is version 3 without cancel requests: nobody could record ExecutionCancelRequested,
 * so a v2 history never holds one and every other rule is the same (the rules that read
 * `cancelRequested` never fire without one).
 */
function mayAppendV2(context: ExecutionContext, event: ExecutionEvent): boolean {
  return event.type !== 'ExecutionCancelRequested' && mayAppendV3(context, event);
}

/**
 * Version 1 is version 2 without the executor's start-to-close timeout: under v1 only the owner
 * could end a run as TimedOut.
 */
function mayAppendV1(context: ExecutionContext, event: ExecutionEvent): boolean {
  if (!mayAppendV2(context, event)) return false;
  if (event.type === 'OwnershipReclaimed') return event.metadata.by === EXECUTOR;
  return event.metadata.by === context.owner;
}

/**
 * Version 7 is version 8 with an attempt spent by a baton that came back before its run started
 * (the `unstartedKeepsAttempt` guard says no): the executor then decided a retry or an
 * abandonment, as after a failed run.
 */
const executionMachineV7 = executionMachine.provide({ guards: { unstartedKeepsAttempt: () => false } });

/** A version before 7: `mayAppend` as that version had it, no handoff straight from Requested, and an attempt spent as version 7 spent it. */
const before7 = (mayAppendThen: (context: ExecutionContext, event: ExecutionEvent) => boolean) =>
  executionMachine.provide({
    guards: { mayAppend: ({ context, event }) => mayAppendThen(context, event), handsOffFromRequested: () => false, unstartedKeepsAttempt: () => false },
  });
const executionMachineV1 = before7(mayAppendV1);
const executionMachineV2 = before7(mayAppendV2);
const executionMachineV3 = before7(mayAppendV3);
const executionMachineV4 = before7(mayAppendV4);
const executionMachineV5 = before7(mayAppendV5);
const executionMachineV6 = before7(mayAppendV6);

export const executionMachineVersions: ReadonlyMap<string, AnyStateMachine> = new Map<string, AnyStateMachine>([
  ['1', executionMachineV1],
  ['2', executionMachineV2],
  ['3', executionMachineV3],
  ['4', executionMachineV4],
  ['5', executionMachineV5],
  ['6', executionMachineV6],
  ['7', executionMachineV7],
  [MACHINE_VERSION, executionMachine],
]);

/** The versions this build reads, as "1–7" while they run on from 1 (they do), else listed. */
export function knownMachineVersions(): string {
  const keys = [...executionMachineVersions.keys()];
  const contiguous = keys.every((k, i) => k === String(i + 1));
  return contiguous && keys.length > 1 ? `${keys[0]}–${keys.at(-1)}` : keys.join(', ');
}

/**
 * A stored event names an execution machine version this build does not have. Most often a newer
 * Baton wrote it (a rolling deploy, a history exported from production): the history is fine and
 * this build cannot read it, which no divergence or refused transition should be mistaken for.
 */
export class UnknownMachineVersionError extends BatonError {
  /** A whole number past every version this build has: a newer Baton wrote it. */
  readonly newer: boolean;
  constructor(
    readonly machineVersion: string,
    /** Where the history names it, when a history is being read. */
    readonly at?: { executionId: string; revision: number; eventType: string },
  ) {
    const where = at ? `execution ${at.executionId}: the event at revision ${at.revision} (${at.eventType}) was ` : '';
    super(`${where}${unknownMachineVersionReason(machineVersion)}`);
    this.newer = isNewerVersion(machineVersion);
  }
}

const isNewerVersion = (v: string) => /^\d+$/.test(v) && [...executionMachineVersions.keys()].every((k) => !/^\d+$/.test(k) || Number(v) > Number(k));

/** Why a history naming `version` cannot be read here, for a message about one of its events ("written by …"). */
export function unknownMachineVersionReason(version: string): string {
  return isNewerVersion(version)
    ? `written by execution machine version ${version}; this build of Baton knows versions ${knownMachineVersions()}: upgrade Baton to read this history`
    : `written by execution machine version ${JSON.stringify(version)}, which this build of Baton does not have (it knows versions ${knownMachineVersions()}; a version Baton wrote stays in actors/execution-machine-versions.ts while any history names it)`;
}

/** The version a stored event names when this build does not have it; undefined when it does (or none is named: the current). */
export function unknownMachineVersion(metadata: { machineVersion?: unknown }): string | undefined {
  const v = metadata.machineVersion;
  if (v === undefined) return undefined;
  return typeof v === 'string' && executionMachineVersions.has(v) ? undefined : String(v);
}

/**
 * The machine a stored event was decided by, or UnknownMachineVersionError. The runtime records
 * a version on every event; one without (a hand-written fixture) is read with the current.
 */
export function machineForVersion(version: string | undefined): AnyStateMachine {
  const v = version ?? MACHINE_VERSION;
  const machine = executionMachineVersions.get(v);
  if (!machine) throw new UnknownMachineVersionError(v);
  return machine;
}
