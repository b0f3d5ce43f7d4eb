// Action versions: the rule every door checks a version with (defineAction, `baton submit
// core.echo@2` / `--action-version`, GraphQL `actionVersion`, the library's submit, the event
// catalog), and how a worker advertises one. Pure, so the catalog can build on it.
//
// A version is a positive integer. "Newest" is the largest; nothing else is compared. An action
// defined without a version is version 1, so unversioned actions keep working and count as one
// version, and the first explicit bump is `version: 2`.
import { integerProblem } from './rules.ts';

/** The version of an action that names none. */
export const DEFAULT_ACTION_VERSION = 1;
export const MAX_ACTION_VERSION = 1_000_000;

/** Why `value` is not an action version, or undefined when it is one. */
export function actionVersionProblem(value: unknown): string | undefined {
  return integerProblem(value, 1, MAX_ACTION_VERSION) === undefined ? undefined : `must be a whole number from 1 to ${MAX_ACTION_VERSION}`;
}

/**
 * `core.echo@2` → { action: 'core.echo', version: 2 }; `core.echo` → { action: 'core.echo' }.
 * A malformed version after `@` is a problem naming it, never a silent part of the name.
 */
export function splitActionRef(ref: string): { action: string; version?: number } | { problem: string } {
  const at = ref.lastIndexOf('@');
  if (at < 0) return { action: ref };
  const text = ref.slice(at + 1);
  const version = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (actionVersionProblem(version) !== undefined) {
    return { problem: `"${ref}": the version after "@" must be a whole number from 1 to ${MAX_ACTION_VERSION}` };
  }
  return { action: ref.slice(0, at), version };
}

/**
 * The version to show for an execution (read model, `baton status`, GraphQL): the one its latest
 * attempt was handed off to run (1 when the handoff named none), else its pin, else null.
 */
export function versionShown(c: { pinnedVersion?: number; actionVersion?: number; scheduledAt?: string }): number | null {
  return c.actionVersion ?? (c.scheduledAt !== undefined ? DEFAULT_ACTION_VERSION : (c.pinnedVersion ?? null));
}

/**
 * What a worker's liveness row lists for an action it offers at `version`: the bare name (what
 * every reader of the row matches on) and, for a declared version, `name@version` too.
 */
export function offeredNames(action: string, version: number | undefined): string[] {
  return version === undefined ? [action] : [action, `${action}@${version}`];
}

/**
 * The version of `action` a worker offers, read from the names its liveness row lists (see
 * offeredNames): `name@N` says N, the bare name alone says 1; undefined when it does not offer it.
 */
export function offeredVersion(names: readonly string[], action: string): number | undefined {
  const prefix = `${action}@`;
  let bare = false;
  for (const n of names) {
    if (n === action) bare = true;
    else if (n.startsWith(prefix)) {
      const v = Number(n.slice(prefix.length));
      if (actionVersionProblem(v) === undefined) return v;
    }
  }
  return bare ? DEFAULT_ACTION_VERSION : undefined;
}
