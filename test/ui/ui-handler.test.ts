// The /ui handler over real HTTP: the listed files with their content types and headers, 404
// for anything else (traversal attempts included, sent raw so nothing normalizes them first),
// 405 for other methods, and GraphQL still answering beside it.
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { importPreactBesideIt } from '../../src/api/ui.ts';
import { gql, useApi } from '../api/api-harness.ts';

const api = useApi();

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request with the path exactly as given (fetch would resolve `..` before sending). */
function raw(path: string, method = 'GET'): Promise<RawResponse> {
  const { hostname, port } = new URL(api().server.uiUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, path, method, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

describe('GET /ui', () => {
  it('serves the page at /ui, /ui/ and with a query string, with a strict CSP and no caching', async () => {
    expect(api().server.uiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/ui$/);
    for (const path of ['/ui', '/ui/', '/ui?execution=0190c2d4-0000-7000-8000-000000000000']) {
      const r = await raw(path);
      expect(r.status, path).toBe(200);
      expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(r.body).toContain('<script type="module" src="/ui/app.js"></script>');
    }
    const r = await raw('/ui');
    expect(r.headers['cache-control']).toBe('no-cache');
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    const csp = r.headers['content-security-policy']!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(r.body).not.toMatch(/<script(?![^>]*\bsrc=)/); // no inline script for the CSP to refuse
  });

  it('serves scripts, styles and the vendored modules with their content types', async () => {
    const types: Record<string, string> = {
      '/ui/app.js': 'text/javascript; charset=utf-8',
      '/ui/statechart.js': 'text/javascript; charset=utf-8',
      '/ui/style.css': 'text/css; charset=utf-8',
      '/ui/vendor/preact.mjs': 'text/javascript; charset=utf-8',
      '/ui/vendor/hooks.mjs': 'text/javascript; charset=utf-8',
      '/ui/vendor/htm.mjs': 'text/javascript; charset=utf-8',
    };
    for (const [path, type] of Object.entries(types)) {
      const r = await raw(path);
      expect(r.status, path).toBe(200);
      expect(r.headers['content-type'], path).toBe(type);
      expect(Number(r.headers['content-length']), path).toBe(Buffer.byteLength(r.body));
    }
  });

  it('serves hooks importing the Preact beside it, never a bare specifier a browser cannot resolve', async () => {
    const hooks = (await raw('/ui/vendor/hooks.mjs')).body;
    expect(hooks).toContain('from"./preact.mjs"');
    expect(hooks).not.toMatch(/from\s*["']preact["']/);
    expect(importPreactBesideIt(`import { options } from 'preact';`)).toBe(`import { options } from "./preact.mjs";`);
    expect(() => importPreactBesideIt('export const x = 1;')).toThrow(/no longer imports 'preact'/);
  });

  it('answers HEAD with the headers and no body', async () => {
    const r = await raw('/ui/app.js', 'HEAD');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(Number(r.headers['content-length'])).toBeGreaterThan(0);
    expect(r.body).toBe('');
  });

  it('is 404 for anything not listed, traversal attempts included', async () => {
    for (const path of [
      '/ui/nope.js',
      '/ui/../package.json',
      '/ui/vendor/../../x',
      '/ui/vendor/../app.js',
      '/ui/%2e%2e/package.json',
      '/ui/..%2fpackage.json',
      '/ui/vendor/preact.mjs/../../../package.json',
      '/ui//app.js',
      '/ui/vendor/',
      '/ui/vendor/preact.mjs.map',
      '/ui/ui.ts',
      '/ui/index.html', // served at /ui only
    ]) {
      const r = await raw(path);
      expect(r.status, path).toBe(404);
      expect(r.headers['content-type'], path).toBe('text/plain; charset=utf-8');
      expect(r.body, path).not.toContain('"name": "@baton-run/baton"');
    }
  });

  it('is 405 for other methods, naming the allowed ones', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS']) {
      const r = await raw('/ui', method);
      expect(r.status, method).toBe(405);
      expect(r.headers.allow).toBe('GET, HEAD');
    }
  });

  it('leaves every other path to GraphQL', async () => {
    const r = await gql(api().url, '{ __typename }');
    expect(r.data).toEqual({ __typename: 'Query' });
    expect((await raw('/uix')).status).not.toBe(200); // not a UI path: yoga's 404
    expect((await raw('/uix')).headers['content-security-policy']).toBeUndefined();
  });
});
