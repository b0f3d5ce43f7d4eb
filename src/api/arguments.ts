// Checks of argument values the schema's types cannot express, with the rules of src/input.
// Each error names the argument. (Every String, ID, JSON and DateTime argument has already
// passed the general rules in argument-rules.ts; these add each argument's own limits.)
import { integerProblem, textProblem } from '../input/rules.ts';
import { badInput } from './errors.ts';
import { UUID } from '../ids.ts';

export const MAX_PAGE_SIZE = 100;
export const MAX_EVENTS_LIMIT = 1_000;

/** Execution ids are UUIDs; anything else could never match (and would be a cast error in SQL). */
export function uuidArg(value: string, name: string): string {
  if (!UUID.test(value)) throw badInput(name, 'must be an execution id (a UUID)');
  return value.toLowerCase();
}

export function intInRange(value: number, name: string, min: number, max: number): number {
  const problem = integerProblem(value, min, max);
  if (problem) throw badInput(name, problem);
  return value;
}

/** A string argument that must not be empty and has a length limit. */
export function textArg(value: string, name: string, maxLength: number): string {
  const problem = textProblem(value, { required: true, maxLength });
  if (problem) throw badInput(name, problem);
  return value;
}
