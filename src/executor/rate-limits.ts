// Rate limits as the executor decides them: which of a pass's placements may be handed off now.
// Each rate-limited action (or key of it) has a bucket, a stream `ratelimit-<bucket>` decided by
// the bucket machine (actors/rate-bucket.machine.ts). A pass groups its placements by bucket and
// appends one RateTokensGranted per bucket, at the revision it decided on: with several
// executors, the loser of a race conflicts, reads what the winner appended (from its revision
// on, not the whole stream) and decides again, so the buckets' grants never add up to more than
// the limit. Placements without a token stay in the queue (placement never takes them out).
//
// A handoff must follow its grant within HANDOFF_MARGIN_MS (the executor checks it when it makes
// the handoff, and drops it otherwise: the token is lost, never reused), and a token comes back
// only after period + margin: so the handoffs too, by their own times, never exceed the limit
// in any period. The price is the margin: 5 per second becomes at most 5 per 1.1 s.
//
// Cost on the hot path: nothing for actions without a rate limit; one append per bucket per pass
// that hands off its executions, whatever their number. Measured on the shared test Postgres
// (2 cores, busy), 300 passes each: 1.8 ms a pass granting one token, 1.4 ms granting 64, and
// 6.4 ms when two executors alternate on one bucket (each grant conflicts once: the catch-up
// read of the other's event and the second append). Buckets are granted one after another; an
// appendMany of them all would make a pass with many busy buckets one round trip.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { tokensAt } from '../../actors/rate-bucket.machine.ts';
import { HANDOFF_MARGIN_MS, rateLimitStreamId, windowOf, type RateLimitEvent, type RateLimitPolicy } from '../../schemas/rate-limit-events.ts';
import { WrongExpectedRevisionError } from '../errors.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { rateBucketKind } from '../runtime/rate-bucket-kind.ts';
import type { ActionPolicy } from '../../schemas/worker-events.ts';
import { RateBuckets, rateBucketOf } from '../runtime/rate-buckets.ts';
import type { Placement } from './placement.ts';
import { DEFAULT_NAMESPACE } from '../input/namespace.ts';
import { namespaceRateBucket } from './namespace-rate-limits.ts';
import { newId } from '../ids.ts';

export { rateBucketOf } from '../runtime/rate-buckets.ts';

/** Conflicts with other executors one grant decision rides out before it gives up for this pass. */
const MAX_CONFLICTS = 5;

/** A placement the executor may hand off, and the latest time it may make the handoff (undefined: not rate limited). */
export interface Admitted extends Placement {
  notAfter?: number;
}

export interface RateLimitsOptions {
  store: EventStore;
  log: Logger;
  now: () => number;
  /** Called when a token comes back for executions held back: start a pass. */
  wake: () => void;
  registry?: Registry;
  /** BATON_NAMESPACE_RATE_LIMIT: a rate per namespace, over all its actions (namespace-rate-limits.ts). */
  namespaceRates?: Readonly<Record<string, RateLimitPolicy>>;
}

export interface RateLimits {
  /**
   * For one pass's placement: whether an execution may be placed, by the tokens this executor
   * last saw in its rate bucket, counting down as the pass places (an optimistic hint: admit
   * decides). Unknown buckets (never seen here) admit. So a rate-limited backlog does not fill
   * the workers' room with executions admit would hold back, leaving the others behind them to
   * wait for the next pass. Starts the pass's tally for /metrics (admit ends it).
   */
  passFilter(policyOf: (action: string) => ActionPolicy | undefined, inputOf: (executionId: string) => unknown): (execution: { executionId: string; action: string }) => boolean;
  /** The placements that may go now, in their order; the others wait for a token. */
  admit(placements: readonly Placement[], policyOf: (action: string) => RateLimitPolicy | undefined, inputOf: (executionId: string) => unknown): Promise<Admitted[]>;
  stop(): void;
}

export function createRateLimits(o: RateLimitsOptions): RateLimits {
  const buckets = new RateBuckets(o.store);
  const metrics = o.registry && {
    holds: new Counter({ name: 'baton_rate_limited_total', help: 'Scheduling decisions that held executions of the action back for want of a rate-limit token (one per bucket per pass)', labelNames: ['action'], registers: [o.registry] }),
    granted: new Counter({ name: 'baton_rate_limit_tokens_granted_total', help: 'Rate-limit tokens this executor granted', labelNames: ['action'], registers: [o.registry] }),
    nsHolds: new Counter({ name: 'baton_namespace_rate_limited_total', help: 'Scheduling decisions that held executions of the namespace back for want of a namespace rate-limit token (one per namespace per pass)', labelNames: ['namespace'], registers: [o.registry] }),
    nsGranted: new Counter({ name: 'baton_namespace_rate_limit_tokens_granted_total', help: 'Namespace rate-limit tokens this executor granted', labelNames: ['namespace'], registers: [o.registry] }),
    waiting: new Gauge({ name: 'baton_rate_limit_waiting', help: 'Executions the latest scheduling pass held back for want of a rate-limit token (up to 1,024 per bucket a pass looks at; labelled by action: keys are unbounded)', labelNames: ['action'], registers: [o.registry] }),
  };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  /** One pass's executions held back for want of a token, per action, and the buckets that held them. */
  let tally: { held: Map<string, number>; buckets: Map<string, string> } | undefined;
  function hold(action: string, bucket: string, n: number): void {
    tally ??= { held: new Map(), buckets: new Map() };
    tally.held.set(action, (tally.held.get(action) ?? 0) + n);
    tally.buckets.set(bucket, action);
  }
  function endPass(): void {
    if (metrics) {
      metrics.waiting.reset();
      for (const [action, n] of tally?.held ?? []) metrics.waiting.set({ action }, n);
      for (const action of tally?.buckets.values() ?? []) metrics.holds.inc({ action });
    }
    tally = undefined;
  }

  /** Take up to `wanted` tokens: how many were granted, at what time, and when the next comes back. */
  async function take(bucket: string, policy: RateLimitPolicy, wanted: number): Promise<{ granted: number; at: number; nextAt?: number }> {
    const { limit, windowMs } = windowOf(policy);
    let held = await buckets.known(bucket);
    for (let attempt = 0; ; attempt++) {
      const tokens = tokensAt(held.snapshot, limit, windowMs, o.now());
      const count = Math.min(wanted, tokens.available);
      if (count === 0) return { granted: 0, at: tokens.at, ...(tokens.nextAt !== undefined && { nextAt: tokens.nextAt }) };
      const event: RateLimitEvent = rateBucketKind.make({ type: 'RateTokensGranted', data: { at: new Date(tokens.at).toISOString(), count, limit, windowMs }, by: 'executor' }, new Date(o.now()).toISOString());
      const d = rateBucketKind.decide(bucket, held.snapshot, event);
      if (!d.ok) throw d.error;
      try {
        const r = await o.store.append(rateLimitStreamId(bucket), [{ eventId: newId(), type: event.type, data: event.data, metadata: { ...event.metadata, stateAfter: 'Open' } }], { expectedRevision: held.revision ?? 'no_stream' });
        held = { snapshot: d.snapshot, revision: r.nextExpectedRevision };
        buckets.put(bucket, held);
        const left = tokensAt(held.snapshot, limit, windowMs, tokens.at);
        return { granted: count, at: tokens.at, ...(left.nextAt !== undefined && { nextAt: left.nextAt }) };
      } catch (err) {
        if (!(err instanceof WrongExpectedRevisionError) || attempt >= MAX_CONFLICTS) throw err;
        held = await buckets.catchUp(bucket); // another executor granted from it: decide again on what it stored
      }
    }
  }

  /** Start a pass when the earliest token this executor waits for comes back. */
  let wakeDue: number | undefined;
  function wakeAt(at: number): void {
    if (stopped || (wakeDue !== undefined && wakeDue <= at)) return;
    clearTimeout(timer);
    wakeDue = at;
    timer = setTimeout(() => {
      wakeDue = undefined;
      o.wake();
    }, Math.max(1, at - o.now())).unref();
  }

  /** The placements their namespaces' buckets grant a token to (all of them when no namespace is limited). */
  async function admitNamespaces(placements: readonly Placement[]): Promise<readonly Admitted[]> {
    const rates = o.namespaceRates;
    if (!rates || Object.keys(rates).length === 0) return placements;
    const groups = new Map<string, number[]>();
    placements.forEach((p, i) => {
      const ns = p.execution.namespace ?? DEFAULT_NAMESPACE;
      if (!rates[ns]) return;
      let g = groups.get(ns);
      if (!g) groups.set(ns, (g = []));
      g.push(i);
    });
    const refused = new Set<number>();
    const notAfter = new Map<number, number>();
    for (const [ns, members] of groups) {
      let granted = 0;
      try {
        const t = await take(namespaceRateBucket(ns), rates[ns]!, members.length);
        granted = t.granted;
        members.slice(0, granted).forEach((i) => notAfter.set(i, t.at + HANDOFF_MARGIN_MS));
        if (t.nextAt !== undefined) wakeAt(t.nextAt);
      } catch (err) {
        o.log.warn({ err, namespace: ns }, 'namespace rate-limit grant failed; its executions wait for the next pass');
      }
      members.forEach((i, k) => k >= granted && refused.add(i));
      if (granted > 0) metrics?.nsGranted.inc({ namespace: ns }, granted);
      if (granted < members.length) metrics?.nsHolds.inc({ namespace: ns });
    }
    const admitted: Admitted[] = [];
    placements.forEach((p, i) => {
      if (refused.has(i)) return;
      const until = notAfter.get(i);
      admitted.push(until === undefined ? p : { ...p, notAfter: until });
    });
    return admitted;
  }

  return {
    passFilter(policyOf, inputOf) {
      tally = undefined;
      const left = new Map<string, number>();
      const now = o.now();
      return (e) => {
        const limit = policyOf(e.action)?.rateLimit;
        if (!limit) return true;
        const bucket = rateBucketOf(e.action, limit, () => inputOf(e.executionId));
        let n = left.get(bucket);
        if (n === undefined) {
          const held = buckets.peek(bucket);
          if (!held) return true;
          const { limit: max, windowMs } = windowOf(limit);
          const t = tokensAt(held.snapshot, max, windowMs, now);
          if (t.nextAt !== undefined) wakeAt(t.nextAt);
          n = t.available;
        }
        left.set(bucket, Math.max(0, n - 1));
        if (n === 0) hold(e.action, bucket, 1);
        return n > 0;
      };
    },
    async admit(all, policyOf, inputOf) {
      // Namespace limits first: a placement needs its namespace's token, then its action's. A
      // namespace token granted to a placement its action bucket then refuses lapses (it is not
      // returned: it comes back after its window like any other), so both limits hold, at the
      // price of a namespace running under its limit while an action limit within it binds.
      const placements = await admitNamespaces(all);
      const groups = new Map<string, { action: string; policy: RateLimitPolicy; members: number[] }>();
      placements.forEach((p, i) => {
        const policy = policyOf(p.execution.action);
        if (!policy) return;
        const bucket = rateBucketOf(p.execution.action, policy, () => inputOf(p.execution.executionId));
        let g = groups.get(bucket);
        if (!g) groups.set(bucket, (g = { action: p.execution.action, policy, members: [] }));
        g.members.push(i);
      });
      if (groups.size === 0) {
        endPass();
        return [...placements];
      }
      const notAfter = new Map<number, number>();
      const refused = new Set<number>();
      let nextWake: number | undefined;
      for (const [bucket, g] of groups) {
        let granted = 0;
        let at = 0;
        try {
          const t = await take(bucket, g.policy, g.members.length);
          granted = t.granted;
          at = t.at;
          if (t.nextAt !== undefined) nextWake = Math.min(nextWake ?? Infinity, t.nextAt);
        } catch (err) {
          o.log.warn({ err, bucket }, 'rate-limit grant failed; its executions wait for the next pass');
        }
        // Placements come in priority order, so the first ones of the bucket get its tokens.
        g.members.forEach((i, k) => (k < granted ? notAfter.set(i, at + HANDOFF_MARGIN_MS) : refused.add(i)));
        if (granted > 0) metrics?.granted.inc({ action: g.action }, granted);
        if (granted < g.members.length) hold(g.action, bucket, g.members.length - granted);
      }
      endPass();
      if (nextWake !== undefined) wakeAt(nextWake);
      const admitted: Admitted[] = [];
      placements.forEach((p, i) => {
        if (refused.has(i)) return;
        const until = notAfter.get(i);
        admitted.push(until === undefined ? p : { ...p, notAfter: Math.min(until, p.notAfter ?? Infinity) });
      });
      return admitted;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
