// The checks a submission passes in the client before it is stored or sent, the same in both
// modes: checkSubmission (src/runtime/submission.ts), the one every front door runs, against
// the actions the client knows (the definition passed, the client's `actions`, the built-ins).
// Over GraphQL an action named only by the server is let through with its input unchecked: the
// server checks it. Either way `{ n: NaN }`, a Date, a cycle or a symbol key is refused, naming
// where, rather than changed or dropped by JSON.stringify on the way.
import { z } from 'zod';
import { InvalidActionInputError, isActionDefinition, type AnyActionDefinition } from '../actions/action.ts';
import { createActionRegistry, type ActionRegistry } from '../actions/registry.ts';
import { InvalidInputError, pathIn, type InputProblem } from '../input/errors.ts';
import type { SubmitRequest } from '../runtime/execution-runtime.ts';
import { API_NAMES, checkSubmission, repeatedKeyProblems, type Submission, type SubmissionNames } from '../runtime/submission.ts';
import type { SubmitItem, SubmitOptions } from './types.ts';

export type Actions = Pick<ActionRegistry, 'get' | 'names'>;

/** How submitMany names item `i`'s fields: `items[3].input.n`. */
export const itemNames = (i: number): SubmissionNames => ({
  ...(Object.fromEntries(Object.entries(API_NAMES).map(([k, v]) => [k, `items[${i}].${v}`])) as SubmissionNames),
  namespace: `items[${i}].namespace`,
});

/** A call's action, input and options as the Submission every door checks. */
function submissionOf(action: AnyActionDefinition | string, input: unknown, options: SubmitOptions): Submission {
  return {
    action: typeof action === 'string' ? action : action?.name,
    input,
    ...(options.idempotencyKey !== undefined && { idempotencyKey: options.idempotencyKey }),
    ...(options.maxAttempts !== undefined && { maxAttempts: options.maxAttempts }),
    ...(options.priority !== undefined && { priority: options.priority }),
    ...(options.actionVersion !== undefined && { actionVersion: options.actionVersion }),
    ...(options.tags !== undefined && { tags: options.tags }),
    ...(options.namespace !== undefined && { namespace: options.namespace }),
  };
}

/**
 * Each symbol key in `value` (input or tags), which JSON.stringify would drop without a word.
 * Run after checkSubmission: the value is JSON then (no cycle, bounded depth and size).
 */
function symbolKeyProblems(value: unknown, at: string): InputProblem[] {
  const problems: InputProblem[] = [];
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: v, path } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    for (const s of Object.getOwnPropertySymbols(v)) problems.push({ path: pathIn(at, path), message: `a symbol key (${String(s)}) is not JSON` });
    if (Array.isArray(v)) v.forEach((item, i) => stack.push({ value: item, path: [...path, i] }));
    else for (const key of Object.keys(v)) stack.push({ value: (v as Record<string, unknown>)[key], path: [...path, key] });
  }
  return problems;
}

/** One submission checked against `actions`: InvalidInputError or InvalidActionInputError naming each field by `names`. */
export function checkOne(actions: Actions, action: AnyActionDefinition | string, input: unknown, options: SubmitOptions, names: SubmissionNames = API_NAMES): SubmitRequest {
  const request = checkSubmission(actions, submissionOf(action, input, options), names);
  const symbols = [...symbolKeyProblems(input, names.input), ...symbolKeyProblems(options.tags, names.tags)];
  if (symbols.length > 0) throw new InvalidInputError(symbols);
  return request;
}

/**
 * Every item checked before any is stored or sent (the first bad item refuses the call, named
 * `items[i]…`), then a key used twice for different requests: as submitMany over the database
 * always did, now in both modes.
 */
export function checkItems(actionsFor: (action: AnyActionDefinition | string) => Actions, items: readonly SubmitItem[]): SubmitRequest[] {
  const requests = items.map((item, i) => {
    const { action, input, ...options } = item;
    try {
      return checkOne(actionsFor(action), action, input, options, itemNames(i));
    } catch (err) {
      // The schema's own paths start at `input`; say which item's.
      if (err instanceof InvalidActionInputError) err.message = `items[${i}]: ${err.message}`;
      throw err;
    }
  });
  const repeated = repeatedKeyProblems(requests, itemNames, (i) => `items[${i}]`);
  if (repeated.length > 0) throw new InvalidInputError(repeated);
  return requests;
}

/** What a client checks submissions against: the built-ins and the caller's `actions` (a built-in's name keeps the built-in). */
export function knownActions(builtins: readonly AnyActionDefinition[], actions: readonly AnyActionDefinition[] = []): ActionRegistry {
  return createActionRegistry([...builtins, ...actions.filter((a) => !builtins.some((b) => b.name === a.name))]);
}

// An action only the server knows: any input passes here, and the server checks it.
const TAKES_ANY = z.unknown();

/**
 * The actions a submission of `action` is checked against: `known` (the built-ins and the
 * client's `actions`), with the definition passed in place of a registered one of its name.
 * A name `known` lacks is refused as unknown, or with `others: 'server'` (over GraphQL) taken
 * with any input, for the server to check.
 */
export function actionsFor(known: Actions, others: 'refuse' | 'server'): (action: AnyActionDefinition | string) => Actions {
  const base: Actions =
    others === 'refuse' ? known : { get: (name) => known.get(name) ?? ({ name, input: TAKES_ANY } as unknown as AnyActionDefinition), names: () => known.names() };
  return (action) =>
    !isActionDefinition(action) || known.get(action.name) === action
      ? base
      : { get: (n) => (n === action.name ? action : base.get(n)), names: () => [...new Set([...known.names(), action.name])].sort() };
}
