// The web timeline at /ui: the page's own files from src/api/ui/ and the Preact and htm modules it
// imports, all from a list fixed at start. A request path is only ever a key into that list, so
// no request can name a file of its own (`/ui/../package.json` is simply not a key: 404).
// The page holds no data and needs no token; its GraphQL calls carry one.
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const UI_PATH = '/ui';

const PAGE_DIR = fileURLToPath(new URL('./ui/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

// Scripts and styles only from here, no inline script (so no import map either: see
// vendorAssets), data only from this API. 'unsafe-inline' is never needed: Preact sets styles
// through the CSSOM, which style-src does not govern.
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const COMMON_HEADERS = {
  'cache-control': 'no-cache',
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

interface Asset {
  file: string;
  contentType: string;
  /** Applied to the file's text before it is served. */
  rewrite?: (source: string) => string;
}

/** True for the paths the UI handler answers; everything else is the GraphQL server's. */
export function isUiRequest(url: string | undefined): boolean {
  const pathname = (url ?? '').split('?', 1)[0]!;
  return pathname === UI_PATH || pathname.startsWith(`${UI_PATH}/`);
}

/** The request listener for /ui and /ui/...: GET and HEAD of the listed files, 404 otherwise. */
export function createUiHandler(): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const assets = new Map([...pageAssets(), ...vendorAssets()]);
  return (req, res) => {
    void serve(assets, req, res).catch(() => {
      if (!res.headersSent) answer(res, 500, 'could not read the file');
      else res.destroy();
    });
  };
}

async function serve(assets: Map<string, Asset>, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    answer(res, 405, 'only GET and HEAD', { allow: 'GET, HEAD' });
    return;
  }
  const asset = assets.get((req.url ?? '').split('?', 1)[0]!);
  if (!asset) {
    answer(res, 404, 'not found');
    return;
  }
  const text = await readFile(asset.file, 'utf8');
  const body = Buffer.from(asset.rewrite ? asset.rewrite(text) : text, 'utf8');
  res.writeHead(200, { ...COMMON_HEADERS, 'content-type': asset.contentType, 'content-length': body.length });
  res.end(req.method === 'HEAD' ? undefined : body);
}

function answer(res: http.ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  const body = Buffer.from(`${message}\n`, 'utf8');
  res.writeHead(status, { ...COMMON_HEADERS, ...headers, 'content-type': 'text/plain; charset=utf-8', 'content-length': body.length });
  res.end(body);
}

/** The page's files by URL: index.html at /ui and /ui/, the rest at /ui/<name>. */
function pageAssets(): [string, Asset][] {
  const entries: [string, Asset][] = [];
  for (const entry of readdirSync(PAGE_DIR, { withFileTypes: true })) {
    const contentType = CONTENT_TYPES[path.extname(entry.name)];
    if (!entry.isFile() || !contentType) continue;
    const asset = { file: path.join(PAGE_DIR, entry.name), contentType };
    if (entry.name === 'index.html') entries.push([UI_PATH, asset], [`${UI_PATH}/`, asset]);
    else entries.push([`${UI_PATH}/${entry.name}`, asset]);
  }
  return entries;
}

/**
 * Preact, its hooks and htm as native ES modules. Hooks imports 'preact' by its bare name, which a
 * browser resolves only through an import map, an inline script the CSP forbids; so it is served
 * with that one import pointing at the copy next to it.
 */
function vendorAssets(): [string, Asset][] {
  const require = createRequire(import.meta.url);
  const contentType = CONTENT_TYPES['.mjs']!;
  return [
    [`${UI_PATH}/vendor/preact.mjs`, { file: require.resolve('preact'), contentType }],
    [`${UI_PATH}/vendor/hooks.mjs`, { file: require.resolve('preact/hooks'), contentType, rewrite: importPreactBesideIt }],
    // htm's require entry is CommonJS; its ES module sits beside it.
    [`${UI_PATH}/vendor/htm.mjs`, { file: path.join(path.dirname(require.resolve('htm')), 'htm.mjs'), contentType }],
  ];
}

const BARE_PREACT_IMPORT = /(\bfrom\s*)(["'])preact\2/g;

export function importPreactBesideIt(source: string): string {
  const rewritten = source.replace(BARE_PREACT_IMPORT, '$1"./preact.mjs"');
  // A Preact release that imports differently must fail loudly here, not as a blank page.
  if (rewritten === source) throw new Error("preact/hooks no longer imports 'preact' as expected");
  return rewritten;
}
