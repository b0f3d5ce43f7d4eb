// The GraphQL API host: graphql-yoga on node:http at /graphql (GraphiQL there too, for browsers).
// Hardening, outermost first: connection cap and header/request timeouts, body size limit
// (413), CSRF header check, bearer tokens (401/403; GraphiQL's page too), repeated JSON keys
// refused (repeated-keys.ts), bracket nesting checked
// before parsing (query-nesting.ts), graphql-armor's depth/alias/token/cost limits and
// suggestion blocking, introspection (a setting), argument
// checks in the resolvers, the response budget (large values truncated, large responses
// refused), subscription caps, and error masking (no stacks, no SQL; stack traces in stored
// errors for the admin token only; database outages → 503 SERVICE_UNAVAILABLE).
import type { RateLimitPolicy } from '../../schemas/rate-limit-events.ts';
import http from 'node:http';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import type { FieldNode, ValidationContext } from 'graphql';
import { createGraphQLError, createYoga, type Plugin, type YogaLogger } from 'graphql-yoga';
import type pg from 'pg';
import type { Logger } from 'pino';
import { executionStreamId } from '../../schemas/events.ts';
import type { ActionRegistry } from '../actions/registry.ts';
import { DEFAULT_API_HOST, DEFAULT_API_LIMITS, DEFAULT_API_PORT, type ApiLimits } from '../config.ts';
import { staleAfterMs } from '../liveness/liveness-store.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { listenOn } from '../observability/listen.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { checkExposure, createApiAuth, useTokenAuth } from './auth.ts';
import type { ApiContext } from './context.ts';
import { describeApiError, isDatabaseUnavailable, maskApiError } from './errors.ts';
import { refuseGraphiQL, renderGraphiQL, wantsGraphiQL } from './graphiql.ts';
import { createExecutionUpdates } from './live-updates.ts';
import { createLoaders } from './loaders.ts';
import { findExecutions } from './read-model-queries.ts';
import { ResponseBudget, useResponseBudget } from './response-budget.ts';
import { useInputProblems } from './input-problems.ts';
import { useRepeatedKeyRefusal } from './repeated-keys.ts';
import { ARMOR } from './query-limits.ts';
import { useQueryNestingLimit } from './query-nesting.ts';
import { loadApiSchema } from './schema.ts';
import { createSubscriptionSlots } from './subscription-slots.ts';
import { createUiHandler, isUiRequest, UI_PATH } from './ui.ts';
import { namespaceOr } from '../input/namespace.ts';
import { requestTraceFields } from '../observability/tracing.ts';
import { componentLogger } from '../log.ts';

export const GRAPHQL_PATH = '/graphql';
/** What a client must send on requests a browser could make without a CORS preflight. */
export const CSRF_HEADER = 'x-graphql-yoga-csrf';

// What GraphiQL opens with instead of its stock welcome: a query that runs as is and shows the
// API's main reads (page on with `after: endCursor`).
export const GRAPHIQL_EXAMPLE = `# Baton's GraphQL API: press the run button (or Ctrl-Enter). The schema is in the docs pane.
# The operator console at /ui is built on these same queries.
query Overview {
  # The newest failures, with why they failed; page on with after: "<endCursor>".
  executions(filter: { status: Failed }, first: 10) {
    edges { node { id action attempt error finishedAt workerId } }
    pageInfo { hasNextPage endCursor }
  }
  # Who is working, and how each action is doing.
  workers { id status alive inFlight capacity heartbeatAgeMs actions }
  actionStats { action queued running completed failed p50Ms p95Ms concurrencyLimit slotsHeld }
}

# Also try: mutation { submitExecution(action: "core.echo", input: { hello: "world" }) { executionId status } }
`;

// After this long, close() cuts connections that did not finish (a client that never reads).
const CLOSE_GRACE_MS = 5_000;
const IDLE_SWEEP_MS = 25;

export interface ApiServerOptions {
  pool: pg.Pool;
  runtime: ExecutionRuntime;
  actions: ActionRegistry;
  log: Logger;
  /** Default 127.0.0.1. Any other address needs a token. */
  host?: string;
  /** Default 4000; 0 picks a free port. */
  port?: number;
  /**
   * What asked for `port` (`--port`, `BATON_API_PORT`), when the user did: a taken port is then
   * refused in one line naming it. Unset, `port` is the default, and a taken one is replaced by a free one.
   */
  portSetting?: string;
  /** BATON_API_TOKEN: needed for mutations; with any token set, every request needs one. */
  adminToken?: string;
  /** BATON_API_READ_TOKEN: queries and subscriptions only. */
  readToken?: string;
  /** BATON_API_NAMESPACE_TOKENS: tokens limited to namespaces (namespace-tokens.ts). */
  namespaceTokens?: string;
  /** Workers silent longer than this are reported not alive; default 30 s (3 × 10 s heartbeats). */
  staleAfterMs?: number;
  /** BATON_NAMESPACE_RATE_LIMIT, for waiting reasons (the executors enforce it). */
  namespaceRateLimits?: Readonly<Record<string, RateLimitPolicy>>;
  /** Larger bodies get 413; default limits.maxBodyBytes (BATON_API_MAX_BODY_BYTES, 1 MiB). */
  bodyLimitBytes?: number;
  /** The event store, for workflows (folded from their streams); without it they answer NOT_CONFIGURED. Not closed by close(). */
  store?: EventStore;
  /** The work transport, for deadLetters and retryDeadLetter; without it they answer NOT_CONFIGURED. Not closed by close(). */
  transport?: WorkTransport;
  /** Response sizes, subscription caps, connections and HTTP timeouts; each unset one is DEFAULT_API_LIMITS'. */
  limits?: Partial<ApiLimits>;
  /** BATON_API_INTROSPECTION; default true. False refuses introspection queries and does not serve GraphiQL. */
  introspection?: boolean;
  /** How long a subscription waits for an execution it cannot see before asking the event store; default 10 s. */
  unknownExecutionGraceMs?: number;
}

export interface ApiServer {
  /** The GraphQL endpoint, e.g. http://127.0.0.1:4000/graphql (GraphiQL in a browser). */
  url: string;
  /** The web timeline, e.g. http://127.0.0.1:4000/ui. */
  uiUrl: string;
  /** Ends subscriptions, the LISTEN connection and the HTTP server. */
  close(): Promise<void>;
}

export async function startApiServer(o: ApiServerOptions): Promise<ApiServer> {
  const host = o.host ?? DEFAULT_API_HOST;
  checkExposure({ host, adminToken: o.adminToken, readToken: o.readToken, namespaceTokens: o.namespaceTokens });
  const log = componentLogger(o.log, 'api');
  const auth = createApiAuth(o);
  const limits: ApiLimits = { ...DEFAULT_API_LIMITS, ...o.limits };
  const introspection = o.introspection ?? true;
  const schema = await loadApiSchema();
  const updates = createExecutionUpdates({
    pool: o.pool,
    readRows: (ids) => findExecutions(o.pool, ids, limits.maxValueBytes),
    namespaceOf: (id) => executionNamespace(o, id),
    slots: createSubscriptionSlots(limits),
    ...(o.unknownExecutionGraceMs !== undefined && { unknownGraceMs: o.unknownExecutionGraceMs }),
    log,
  });
  // What one response (or one event of a subscription) starts with.
  const perResponse = () => ({ loaders: createLoaders(o.pool, undefined, limits.maxValueBytes), budget: new ResponseBudget(limits) });

  const yoga = createYoga<{ req?: http.IncomingMessage }, ApiContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    landingPage: false,
    cors: false, // same-origin only: GraphiQL is served from here; other origins get no CORS grant
    maxRequestBodySize: o.bodyLimitBytes ?? limits.maxBodyBytes,
    maskedErrors: { maskError: maskApiError },
    logging: yogaLogger(log),
    graphiql: introspection && { title: 'Baton', subscriptionsProtocol: 'SSE', defaultQuery: GRAPHIQL_EXAMPLE },
    renderGraphiQL,
    plugins: [
      useCSRFPrevention({ requestHeaders: [CSRF_HEADER] }),
      useTokenAuth(auth),
      useRepeatedKeyRefusal(), // after the token check: a stranger gets 401, not a verdict on the body
      useQueryNestingLimit(), // throws from onParse, before any parser (armor's too) recurses
      EnvelopArmorPlugin(ARMOR),
      ...(introspection ? [] : [useNoIntrospection()]),
      useResponseBudget(),
      useInputProblems(),
    ],
    context: ({ request, req }) => ({
      role: auth.roleOf(request) ?? 'read',
      namespaces: auth.namespacesOf(request),
      client: req?.socket.remoteAddress ?? 'unknown',
      ...perResponse(),
      renew(this: ApiContext) {
        Object.assign(this, perResponse());
      },
      pool: o.pool,
      runtime: o.runtime,
      store: o.store,
      actions: o.actions,
      updates,
      transport: o.transport,
      staleAfterMs: o.staleAfterMs ?? staleAfterMs(),
      namespaceRateLimits: o.namespaceRateLimits ?? {},
      maxSubmitBatch: limits.maxSubmitBatch,
      log,
      trace: requestTraceFields(request.headers),
    }),
  });

  const ui = createUiHandler();
  const server = http.createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // Node looks for expired requests only this often (default 30 s): a 10 s headers timeout
      // would otherwise let a slow client hold its connection for up to 40 s.
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2))),
    },
    (req, res) => {
      if (isUiRequest(req.url)) return ui(req, res);
      if (wantsGraphiQL(req, GRAPHQL_PATH)) {
        if (!introspection) return refuseGraphiQL(res, 'off', GRAPHQL_PATH);
        if (auth.roleOfAuthorization(req.headers.authorization) === undefined) return refuseGraphiQL(res, 'token', GRAPHQL_PATH);
      }
      return yoga(req, res);
    },
  );
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // Past this many open connections Node closes new ones at once; those open keep being served.
  server.maxConnections = limits.maxConnections;
  // A flood of refused connections is one warning every 10 s, not one line each.
  let warnedAt = 0;
  server.on('drop', (data?: { remoteAddress?: string }) => {
    if (Date.now() - warnedAt < 10_000) return;
    warnedAt = Date.now();
    log.warn({ client: data?.remoteAddress, maxConnections: limits.maxConnections }, 'refusing connections: too many open (BATON_API_MAX_CONNECTIONS)');
  });
  let origin: string;
  try {
    ({ origin } = await listenOn(server, { host, port: o.port ?? DEFAULT_API_PORT, setting: o.portSetting, what: 'the GraphQL API', log }));
  } catch (err) {
    await updates.close();
    throw err;
  }
  const url = `${origin}${GRAPHQL_PATH}`;
  const uiUrl = `${origin}${UI_PATH}`;
  log.info({ url, uiUrl, tokens: auth.required }, 'GraphQL API listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    uiUrl,
    close: () =>
      (closing ??= (async () => {
        await updates.close(); // ends every subscription, so their responses finish
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // close() ends only the connections idle now: one whose response was in flight would be
        // kept open for its keep-alive timeout once that response finished. Close those as they go idle.
        server.closeIdleConnections();
        const idle = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        await closed;
        clearInterval(idle);
        clearTimeout(cut);
        await yoga.dispose();
      })()),
  };
}

/** The execution's namespace (its ExecutionRequested's: one event read, not its history), or undefined when the store has none. */
async function executionNamespace(o: ApiServerOptions, executionId: string): Promise<string | undefined> {
  const [first] = await (o.store ?? o.runtime.store).readStream(executionStreamId(executionId), { limit: 1 });
  return first && namespaceOr((first.data as { namespace?: string } | null)?.namespace);
}

/**
 * BATON_API_INTROSPECTION=off: `__schema` and `__type` fail validation (`__typename` still
 * works). graphql's NoSchemaIntrospectionCustomRule would do, but its error comes from our copy
 * of graphql, which yoga may not take for a GraphQLError (see errors.ts) and then masks.
 */
const useNoIntrospection = (): Plugin => ({
  onValidate: ({ addValidationRule }) =>
    addValidationRule((context: ValidationContext) => ({
      Field(node: FieldNode) {
        if (node.name.value === '__schema' || node.name.value === '__type') {
          context.reportError(createGraphQLError('introspection is off on this server (BATON_API_INTROSPECTION=off)', { nodes: [node] }));
        }
      },
    })),
});

const isClientGone = (err: unknown) => err instanceof Error && err.message === 'aborted' && (err as { code?: unknown }).code === 'ECONNRESET';

/** yoga's logger on pino. Client mistakes are debug, outages warn; only the unexpected is an error. */
function yogaLogger(log: Logger): YogaLogger {
  const original = (e: unknown) => (e as { originalError?: unknown })?.originalError ?? e;
  return {
    debug: (...args) => log.debug({ yoga: args.map(String) }, 'yoga'),
    info: (...args) => log.info({ yoga: args.map(String) }, 'yoga'),
    warn: (...args) => log.warn({ yoga: args.map(String) }, 'yoga'),
    error: (...args) => {
      const err = original(args[0]);
      if (describeApiError(err)) log.debug({ err }, 'request refused');
      // Node's request stream ends with this when the client hangs up mid-body: the client's doing, not an outage.
      else if (isClientGone(err)) log.debug({ err }, 'the client hung up before its request was read');
      else if (isDatabaseUnavailable(err)) log.warn({ err }, 'database unavailable');
      else log.error({ err }, 'request failed');
    },
  };
}
