// Which version of an action an execution runs on, decided at handoff from the directory of live
// workers (README: Versioned actions). Pure: placement (placement.ts) asks it once per action and
// pin per pass, and hands the execution only to workers offering the chosen version.
//
// Rules (each a test in test/unit/version-choice.test.ts):
//   - a pinned execution runs on its pin, and on no other version: while no fit worker offers it,
//     it waits (and says so: src/liveness/waiting-reason.ts);
//   - an unpinned one runs on the newest version any fit worker offers, even when only older
//     ones have room (a deploy's new fleet takes new work as soon as it is up), and so does each
//     of its retries: the newest when the retry is handed off, which may be newer than its first
//     attempt's (pin a version to keep every attempt on one);
//   - a worker offers one version of an action: `name@N` in its liveness names, else version 1.
import { DEFAULT_ACTION_VERSION, offeredVersion } from '../input/action-versions.ts';

export interface VersionedWorker {
  workerId: string;
  /** The liveness row's names: `name` and, for a declared version, `name@version`. */
  actions: readonly string[];
}

export interface VersionChoice<W> {
  version: number;
  /** The workers that offer the action at `version`. */
  workers: readonly W[];
}

/**
 * For one scheduling pass: the version an execution of `action` runs on (its pin, else the
 * newest offered) and the workers offering it; undefined when none offers that version.
 * `offering(action)` lists the fit workers offering the action at any version.
 */
export function versionChooser<W extends VersionedWorker>(offering: (action: string) => readonly W[]): (action: string, pinned: number | undefined) => VersionChoice<W> | undefined {
  const byVersion = new Map<string, Map<number, W[]>>();
  const versionsOf = (action: string): Map<number, W[]> => {
    let versions = byVersion.get(action);
    if (versions) return versions;
    byVersion.set(action, (versions = new Map()));
    for (const w of offering(action)) {
      const v = offeredVersion(w.actions, action);
      if (v === undefined) continue;
      let list = versions.get(v);
      if (!list) versions.set(v, (list = []));
      list.push(w);
    }
    return versions;
  };
  return (action, pinned) => {
    const versions = versionsOf(action);
    const version = pinned ?? Math.max(...versions.keys());
    const workers = versions.get(version);
    return workers ? { version, workers } : undefined;
  };
}

/**
 * What the handoff records: the version when the execution is pinned or it is not 1, so a
 * history of unversioned actions stays exactly as before versions existed (absent means 1).
 */
export function handoffVersion(pinned: number | undefined, version: number): { actionVersion?: number } {
  return pinned !== undefined || version !== DEFAULT_ACTION_VERSION ? { actionVersion: version } : {};
}
