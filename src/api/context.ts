// What every resolver gets: the request's role and loaders, and the server's shared parts.
import type { RateLimitPolicy } from '../../schemas/rate-limit-events.ts';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { ActionRegistry } from '../actions/registry.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import type { TraceFields } from '../observability/tracing.ts';
import type { Role } from './auth.ts';
import type { ExecutionUpdates } from './live-updates.ts';
import type { Loaders } from './loaders.ts';
import type { ResponseBudget } from './response-budget.ts';

export interface ApiContext {
  role: Role;
  /** The namespaces the token is limited to (BATON_API_NAMESPACE_TOKENS); undefined: every namespace. */
  namespaces: readonly string[] | undefined;
  /** Who is asking, for per-client caps: the peer's address. */
  client: string;
  loaders: Loaders;
  /** What this response may still carry (BATON_API_MAX_*_BYTES). */
  budget: ResponseBudget;
  /** A fresh budget and loaders: each event of a subscription is a response of its own. */
  renew(): void;
  pool: pg.Pool;
  runtime: ExecutionRuntime;
  /** For workflows, folded from their streams; absent when the server was started without one. */
  store: EventStore | undefined;
  actions: ActionRegistry;
  updates: ExecutionUpdates;
  /** For the dead letters; absent when the server was started without one. */
  transport: WorkTransport | undefined;
  /** Submissions one submitExecutions call may carry (BATON_API_MAX_SUBMIT_BATCH). */
  maxSubmitBatch: number;
  /** A worker without a heartbeat for this long is not alive (the executor's staleness limit). */
  staleAfterMs: number;
  /** BATON_NAMESPACE_RATE_LIMIT: namespaces' rate limits, for waiting reasons. */
  namespaceRateLimits: Readonly<Record<string, RateLimitPolicy>>;
  log: Logger;
  /** The caller's trace context (W3C `traceparent` header), when tracing: a submission continues it. */
  trace?: TraceFields;
}

/** The event store this API reads: its own when given, else the runtime's. */
export const eventStoreOf = (ctx: Pick<ApiContext, 'store' | 'runtime'>): EventStore => ctx.store ?? ctx.runtime.store;
