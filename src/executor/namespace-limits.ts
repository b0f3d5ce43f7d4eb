// Concurrency limits per namespace (BATON_NAMESPACE_CONCURRENCY=`team-a=5,team-b=20`): at most
// that many executions of the namespace hold a slot at once (scheduled, handed off or running),
// whatever their actions; the rest wait in Requested, in priority then FIFO order, holding back
// only their own namespace. Counted from the same slots as the actions' limits
// (concurrency-slots.ts), so every executor derives the same count from the events.
import { namespaceProblem } from '../input/namespace.ts';

export const MAX_NAMESPACE_CONCURRENCY = 1_000_000;

/** How many more executions of `namespace` may start now: Infinity when it has no limit. */
export function namespaceRoom(limits: Readonly<Record<string, number>> | undefined, namespace: string, held: number): number {
  const limit = limits?.[namespace];
  return limit === undefined ? Infinity : Math.max(0, limit - held);
}

/** `a=5,b=20` as limits by namespace, or the first problem (naming the entry). */
export function parseNamespaceLimits(text: string): { ok: true; limits: Record<string, number> } | { ok: false; problem: string } {
  const limits: Record<string, number> = {};
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([^=]+)=(\d{1,7})$/.exec(entry);
    if (!m) return { ok: false, problem: `"${entry.slice(0, 80)}" must be <namespace>=<limit>, e.g. team-a=5` };
    const [, name, n] = m as unknown as [string, string, string];
    const problem = namespaceProblem(name.trim());
    if (problem) return { ok: false, problem: `"${name.slice(0, 80)}" ${problem}` };
    const limit = Number(n);
    if (limit < 1 || limit > MAX_NAMESPACE_CONCURRENCY) return { ok: false, problem: `${name.trim()}: the limit must be from 1 to ${MAX_NAMESPACE_CONCURRENCY}` };
    if (Object.hasOwn(limits, name.trim())) return { ok: false, problem: `${name.trim()} is given twice: one limit per namespace` };
    limits[name.trim()] = limit;
  }
  return { ok: true, limits };
}
