// What a host does before its first execution so that the first ones run as fast as the rest:
// its event store's connections get their statements prepared (EventStore.warmUp) and a made-up
// execution runs through the catalog and the machine in memory (warmUpExecutions). Measured here
// (four pairs of runs alternated), the first three pickups after a worker started took 45–76 ms
// together without it and 23–45 ms with it; a warm pickup takes ~3 ms.
import type { Logger } from 'pino';
import type { EventStore } from '../eventstore/event-store.ts';
import { warmUpExecutions } from '../runtime/execution-kind.ts';

/**
 * Never fails the host: one that cannot warm up starts anyway, and its first executions pay what
 * the warm-up would have (logged as a warning).
 */
export async function warmUp(store: EventStore, log: Logger): Promise<void> {
  const startedAt = performance.now();
  try {
    warmUpExecutions();
    await store.warmUp?.();
    log.debug({ ms: Math.round(performance.now() - startedAt) }, 'warmed up: event store connections and the execution path');
  } catch (err) {
    log.warn({ err }, 'could not warm up (event store connections, execution path); starting anyway');
  }
}
