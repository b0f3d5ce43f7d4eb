// Concurrency buckets and the slots held in each. An action with a concurrency policy has one
// bucket, or one per value of its key path in the input; an execution holds at most one slot
// of its bucket, from its handoff (SchedulingStarted before machine version 7) until its baton
// comes back or it ends.
import { createHash } from 'node:crypto';

/** Identifies one concurrency bucket: the action, and the key's value (null: no key, or the input lacks it). */
export const slotBucket = (action: string, key: string | null): string => JSON.stringify([action, key]);

/** Longer key values are replaced by a digest, so an index entry never holds a large value. */
const MAX_KEY_CHARS = 200;

/**
 * The value at a dotted path (`customer.id`) of an input, as a bucket key: a string as it is,
 * any other value as its JSON (so 42 and "42" share a bucket), and null when the path is
 * missing or null there (one shared bucket for all such inputs).
 */
export function concurrencyKeyOf(path: string | undefined, input: unknown): string | null {
  if (path === undefined) return null;
  let value: unknown = input;
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, part)) return null;
    value = (value as Record<string, unknown>)[part];
  }
  if (value === null || value === undefined) return null;
  const key = typeof value === 'string' ? value : JSON.stringify(value);
  return key.length <= MAX_KEY_CHARS ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/** Whatever holds a slot: its action and bucket, and whether it holds one now. */
export interface SlotHolder {
  action: string;
  bucket: string;
  holdsSlot: boolean;
  /** Its namespace, counted for BATON_NAMESPACE_CONCURRENCY (absent: not counted). */
  namespace?: string;
}

/** Slots held per bucket, and per action (the sum over its buckets). */
export class SlotCounts {
  readonly #held = new Map<string, number>();
  readonly #heldByAction = new Map<string, number>();
  readonly #heldByNamespace = new Map<string, number>();

  /** Idempotent: a holder holds at most one slot. */
  take(t: SlotHolder): void {
    if (t.holdsSlot) return;
    t.holdsSlot = true;
    this.#held.set(t.bucket, (this.#held.get(t.bucket) ?? 0) + 1);
    this.#heldByAction.set(t.action, (this.#heldByAction.get(t.action) ?? 0) + 1);
    if (t.namespace !== undefined) this.#heldByNamespace.set(t.namespace, (this.#heldByNamespace.get(t.namespace) ?? 0) + 1);
  }

  /** Idempotent: gives the slot back only if it is held, so a second release frees nothing. */
  free(t: SlotHolder): void {
    if (!t.holdsSlot) return;
    t.holdsSlot = false;
    const counted = t.namespace === undefined ? [] : ([[this.#heldByNamespace, t.namespace]] as const);
    for (const [map, k] of [[this.#held, t.bucket], [this.#heldByAction, t.action], ...counted] as const) {
      const n = (map.get(k) ?? 1) - 1;
      if (n > 0) map.set(k, n);
      else map.delete(k);
    }
  }

  /** Slots held by executions of the namespace, over every action. */
  heldInNamespace(namespace: string): number {
    return this.#heldByNamespace.get(namespace) ?? 0;
  }

  heldIn(bucket: string): number {
    return this.#held.get(bucket) ?? 0;
  }

  byAction(): ReadonlyMap<string, number> {
    return this.#heldByAction;
  }
}
