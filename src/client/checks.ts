// The checks a submission passes in the client before it is stored or sent, the same in both
// modes: checkSubmission (src/runtime/submission.ts), the one every front door runs. Over the
// database it knows the actions; over GraphQL only the server does, so there the client checks
// all the rest (storable JSON, the options' ranges, tags, namespace) and the server checks the
// action and its schema. Either way `{ n: NaN }`, a Date or a cycle is refused, naming where,
// rather than changed or dropped by JSON.stringify on the way.
import { z } from 'zod';
import { InvalidActionInputError, type AnyActionDefinition } from '../actions/action.ts';
import type { ActionRegistry } from '../actions/registry.ts';
import { InvalidInputError } from '../input/errors.ts';
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

/** One submission checked against `actions`: InvalidInputError or InvalidActionInputError naming each field by `names`. */
export function checkOne(actions: Actions, action: AnyActionDefinition | string, input: unknown, options: SubmitOptions, names: SubmissionNames = API_NAMES): SubmitRequest {
  return checkSubmission(actions, submissionOf(action, input, options), names);
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

// Over GraphQL the server knows the actions: any name passes here with a schema that takes
// anything, so only what the server's own check would add is left to it (unknown action, schema).
const TAKES_ANY = z.unknown();
/** The actions as the GraphQL client checks against them: every name known, every input fitting. */
export const SERVER_KNOWS: Actions = {
  get: (name) => ({ name, input: TAKES_ANY }) as unknown as AnyActionDefinition,
  names: () => [],
};
