// Rate limits per namespace (BATON_NAMESPACE_RATE_LIMIT=`team-a=100/s,team-b=600/m`): at most that
// many handoffs of the namespace's executions per second (or minute), whatever their actions. Each
// limited namespace has a bucket `~ns~<namespace>` (stream `ratelimit-~ns~<namespace>`; an action's bucket starts with its name, never `~`), decided by the
// same machine as the actions' buckets (actors/rate-bucket.machine.ts).
import { namespaceProblem } from '../input/namespace.ts';
import { MAX_RATE, type RateLimitPolicy } from '../../schemas/worker-events.ts';

/** The bucket of a namespace's rate limit. */
export const namespaceRateBucket = (namespace: string): string => `~ns~${namespace}`;

/** `a=100/s,b=600/m` as policies by namespace, or the first problem (naming the entry). */
export function parseNamespaceRateLimits(text: string): { ok: true; limits: Record<string, RateLimitPolicy> } | { ok: false; problem: string } {
  const limits: Record<string, RateLimitPolicy> = {};
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^([^=]+)=(\d{1,9})\s*\/\s*(s|m)$/.exec(entry);
    if (!m) return { ok: false, problem: `"${entry.slice(0, 80)}" must be <namespace>=<limit>/s or <namespace>=<limit>/m, e.g. team-a=100/s` };
    const [, raw, n, unit] = m as unknown as [string, string, string, string];
    const name = raw.trim();
    const problem = namespaceProblem(name);
    if (problem) return { ok: false, problem: `"${name.slice(0, 80)}" ${problem}` };
    const limit = Number(n);
    if (limit < 1 || limit > MAX_RATE) return { ok: false, problem: `${name}: the rate must be from 1 to ${MAX_RATE}` };
    if (Object.hasOwn(limits, name)) return { ok: false, problem: `${name} is given twice: one limit per namespace` };
    limits[name] = unit === 's' ? { perSecond: limit } : { perMinute: limit };
  }
  return { ok: true, limits };
}
