// Checks of argument values the schema's types cannot express. Each error names the argument.
import { badInput } from './errors.ts';

export const MAX_PAGE_SIZE = 100;
export const MAX_EVENTS_LIMIT = 1_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Execution ids are UUIDs; anything else could never match (and would be a cast error in SQL). */
export function uuidArg(value: string, name: string): string {
  if (!UUID.test(value)) throw badInput(name, 'must be an execution id (a UUID)');
  return value.toLowerCase();
}

export function intInRange(value: number, name: string, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw badInput(name, `must be from ${min} to ${max} (got ${value})`);
  return value;
}

/** A string argument that must not be empty and has a length limit. */
export function textArg(value: string, name: string, maxLength: number): string {
  if (value.trim() === '') throw badInput(name, 'must not be empty');
  if (value.length > maxLength) throw badInput(name, `must be at most ${maxLength} characters (got ${value.length})`);
  return value;
}
