// GraphiQL at /graphql, for browsers. Its page holds no data, but it is a ~9 MB bundle: served
// to anyone, it would let a client without a token make the server send 9 MB per request. So
// with tokens set it is served only to a request that carries a valid one (a browser sends one
// through a header-setting extension; the /ui timeline asks for a token itself), and with
// BATON_API_INTROSPECTION=off not at all. Everything else is yoga's.
import type http from 'node:http';
import type { GraphiQLOptions } from 'graphql-yoga';

/** A browser asking for the page: GET of the endpoint that accepts HTML (yoga's own test). */
export function wantsGraphiQL(req: http.IncomingMessage, endpoint: string): boolean {
  const pathname = (req.url ?? '').split('?', 1)[0];
  return (req.method === 'GET' || req.method === 'HEAD') && pathname === endpoint && (req.headers.accept ?? '').includes('text/html');
}

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** The short page a browser gets instead of GraphiQL: 401 without a token, 404 with it switched off. */
export function refuseGraphiQL(res: http.ServerResponse, why: 'token' | 'off', endpoint: string): void {
  const text =
    why === 'token'
      ? `<h1>This Baton API needs a token</h1>
<p>GraphiQL is served only to a request that carries one (<code>Authorization: Bearer &lt;token&gt;</code>).
A browser sends it only through an extension that sets request headers. The timeline at
<a href="/ui">/ui</a> asks for a token itself. From a script:</p>
<pre>curl -H 'authorization: Bearer &lt;token&gt;' -H 'content-type: application/json' \\
  -d '{"query":"{ workers { id alive } }"}' http://&lt;this server&gt;${endpoint}</pre>`
      : '<h1>GraphiQL is off</h1><p>This server was started with BATON_API_INTROSPECTION=off.</p>';
  const body = Buffer.from(`<!doctype html><meta charset="utf-8"><title>Baton</title>\n${text}\n`, 'utf8');
  res.writeHead(why === 'token' ? 401 : 404, {
    ...PAGE_HEADERS,
    'content-length': body.length,
    ...(why === 'token' && { 'www-authenticate': 'Bearer' }),
  });
  res.end(body);
}

// The offline GraphiQL bundle is ~9 MB of JavaScript: load it on the first browser visit,
// not at every start of every host.
let graphiqlRenderer: Promise<(opts?: GraphiQLOptions) => string> | undefined;
export async function renderGraphiQL(opts: GraphiQLOptions): Promise<string> {
  graphiqlRenderer ??= import('@graphql-yoga/render-graphiql').then((m) => m.renderGraphiQL);
  return (await graphiqlRenderer)(opts);
}
