// What both transports' submitMany answer: each item's outcome, in the items' order, then either
// every item's Submitted or, when an item was not submitted, that item's error, thrown with every
// item's outcome attached (`err.results`), so a caller knows which items are stored and can
// resubmit exactly the others (unkeyed items submitted twice would run twice).
import type { Submitted } from './types.ts';

/** One item's outcome, as the error submitMany throws carries them (`results`). */
export type SubmitManyResult = { ok: true; submitted: Submitted } | { ok: false; error: Error };

// Marks the errors submitMany threw with `results`; Symbol.for, so that two copies of the package agree.
const THROWN_BY_SUBMIT_MANY = Symbol.for('@baton-run/baton.SubmitManyError');

/**
 * The error submitMany throws once something was sent: the first item not submitted, with every
 * item's outcome. Over GraphQL, when the server refuses a batch whole (an item naming an action
 * only the server knows, with input its schema refuses), the earlier batches' items are stored
 * (`ok: true`) and that batch's and the later ones' are not (`ok: false`, each with the error
 * thrown); the message names where it stopped. A batch whose request got no answer
 * (`BatonApiError` NETWORK) may have been stored: send its items again with idempotency keys.
 *
 * The error thrown keeps its own class (`IdempotencyKeyConflictError`, `InvalidInputError`, …), so
 * this class is never constructed: `err instanceof SubmitManyError` says whether `err` is such an
 * error, and then `err.results` is there.
 */
export abstract class SubmitManyError extends Error {
  abstract readonly results: SubmitManyResult[];

  static override [Symbol.hasInstance](value: unknown): boolean {
    return value instanceof Error && (value as { [THROWN_BY_SUBMIT_MANY]?: unknown })[THROWN_BY_SUBMIT_MANY] === true;
  }
}

/** `error`, with every item's outcome attached (`results`): a SubmitManyError. */
export function withResults<E extends Error>(error: E, results: SubmitManyResult[]): E & SubmitManyError {
  Object.defineProperty(error, THROWN_BY_SUBMIT_MANY, { value: true });
  return Object.assign(error, { results }) as E & SubmitManyError;
}

/** Every item's Submitted, or the first failed item's error (`items[i]: …`) with `results` attached. */
export function submittedOrThrow(results: SubmitManyResult[]): Submitted[] {
  const failedAt = results.findIndex((r) => !r.ok);
  if (failedAt < 0) return results.map((r) => (r as { submitted: Submitted }).submitted);
  const error = (results[failedAt] as { error: Error }).error;
  const stored = results.filter((r) => r.ok).length;
  const others = results.length - 1;
  const note = others === 0 ? '' : stored === others ? ' (the other items were submitted)' : ` (${stored} of the ${results.length} items were submitted; the error's \`results\` says which)`;
  error.message = `items[${failedAt}]: ${error.message}${note}`;
  throw withResults(error, results);
}
