// The GraphQL API host: graphql-yoga on node:http at /graphql (GraphiQL there too, for browsers).
// Hardening, outermost first: body size limit (413), CSRF header check, bearer tokens (401/403),
// graphql-armor's depth/alias/token/cost limits and suggestion blocking, argument checks in the
// resolvers, and error masking (no stacks, no SQL; database outages → 503 SERVICE_UNAVAILABLE).
import http from 'node:http';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { createYoga, type GraphiQLOptions, type YogaLogger } from 'graphql-yoga';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { ActionRegistry } from '../actions/registry.ts';
import { DEFAULT_API_HOST, DEFAULT_API_PORT } from '../config.ts';
import { staleAfterMs } from '../liveness/liveness-store.ts';
import type { EventStore } from '../eventstore/event-store.ts';
import { listenOn } from '../observability/listen.ts';
import type { ExecutionRuntime } from '../runtime/execution-runtime.ts';
import type { WorkTransport } from '../transport/work-transport.ts';
import { checkExposure, createApiAuth, useTokenAuth } from './auth.ts';
import type { ApiContext } from './context.ts';
import { describeApiError, isDatabaseUnavailable, maskApiError } from './errors.ts';
import { createExecutionUpdates } from './live-updates.ts';
import { createLoaders } from './loaders.ts';
import { findExecutions } from './read-model-queries.ts';
import { loadApiSchema } from './schema.ts';
import { createUiHandler, isUiRequest, UI_PATH } from './ui.ts';

/** GraphQL requests are small; 64 KiB leaves room for a generous submitExecution input. */
export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024;
export const GRAPHQL_PATH = '/graphql';
/** What a client must send on requests a browser could make without a CORS preflight. */
export const CSRF_HEADER = 'x-graphql-yoga-csrf';

// The deepest real query is 5 levels (executions.edges.node.events.type); 7 leaves room for
// fragments, which count as a level. Aliases: a dashboard needs a handful, not hundreds.
const ARMOR = {
  maxDepth: { n: 7 },
  maxAliases: { n: 15 },
  maxTokens: { n: 2_000 },
  costLimit: { maxCost: 5_000 },
  maxDirectives: { n: 20 },
  blockFieldSuggestion: { enabled: true },
} as const;
// After this long, close() cuts connections that did not finish (a client that never reads).
const CLOSE_GRACE_MS = 5_000;

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
  /** Workers silent longer than this are reported not alive; default 30 s (3 × 10 s heartbeats). */
  staleAfterMs?: number;
  /** Default 64 KiB; larger bodies get 413. */
  bodyLimitBytes?: number;
  /** The event store, for workflows (folded from their streams); without it they answer NOT_CONFIGURED. Not closed by close(). */
  store?: EventStore;
  /** The work transport, for deadLetters and retryDeadLetter; without it they answer NOT_CONFIGURED. Not closed by close(). */
  transport?: WorkTransport;
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
  checkExposure({ host, adminToken: o.adminToken, readToken: o.readToken });
  const log = o.log.child({ component: 'api' });
  const auth = createApiAuth(o);
  const schema = await loadApiSchema();
  const updates = createExecutionUpdates({ pool: o.pool, readRows: (ids) => findExecutions(o.pool, ids), log });

  const yoga = createYoga<Record<string, unknown>, ApiContext>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    landingPage: false,
    cors: false, // same-origin only: GraphiQL is served from here; other origins get no CORS grant
    maxRequestBodySize: o.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    maskedErrors: { maskError: maskApiError },
    logging: yogaLogger(log),
    graphiql: { title: 'Baton', subscriptionsProtocol: 'SSE' },
    renderGraphiQL,
    plugins: [useCSRFPrevention({ requestHeaders: [CSRF_HEADER] }), useTokenAuth(auth), EnvelopArmorPlugin(ARMOR)],
    context: ({ request }) => ({
      role: auth.roleOf(request) ?? 'read',
      loaders: createLoaders(o.pool),
      pool: o.pool,
      runtime: o.runtime,
      store: o.store,
      actions: o.actions,
      updates,
      transport: o.transport,
      staleAfterMs: o.staleAfterMs ?? staleAfterMs(),
      log,
    }),
  });

  const ui = createUiHandler();
  const server = http.createServer((req, res) => (isUiRequest(req.url) ? ui(req, res) : yoga(req, res)));
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
        server.closeIdleConnections();
        const cut = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        await closed;
        clearTimeout(cut);
        await yoga.dispose();
      })()),
  };
}

// The offline GraphiQL bundle is ~9 MB of JavaScript: load it on the first browser visit,
// not at every start of every host.
let graphiqlRenderer: Promise<(opts?: GraphiQLOptions) => string> | undefined;
async function renderGraphiQL(opts: GraphiQLOptions): Promise<string> {
  graphiqlRenderer ??= import('@graphql-yoga/render-graphiql').then((m) => m.renderGraphiQL);
  return (await graphiqlRenderer)(opts);
}

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
      else if (isDatabaseUnavailable(err)) log.warn({ err }, 'database unavailable');
      else log.error({ err }, 'request failed');
    },
  };
}
