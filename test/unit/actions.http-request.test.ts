// Actions: the http.request built-in against a local server: bodies, input checks,
// time limit and abort, size cap, error statuses and network errors.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActionError } from '../../src/actions/action.ts';
import { ActionAbortedError, runAction, validateInput } from '../../src/actions/registry.ts';
import { HTTP_MAX_BODY_BYTES, httpRequest } from '../../src/actions/builtin.ts';
import { createHttpRequestAction } from '../../src/actions/http-request.ts';
import { ctx, rejection } from './actions.fixtures.ts';

describe('http.request', () => {
  // The test server listens on loopback, which http.request reaches only when allowed (outbound-address.test.ts).
  const local = createHttpRequestAction({ allow: ['127.0.0.1'] });
  let server: http.Server;
  let base: string;
  const received: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        const url = new URL(req.url ?? '/', 'http://x');
        switch (url.pathname) {
          case '/json':
            res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'x-test': 'yes' });
            return res.end(JSON.stringify({ hello: 'world', n: [1, 2] }));
          case '/problem':
            res.writeHead(422, { 'content-type': 'application/problem+json' });
            return res.end('{"title":"bad"}');
          case '/text':
            res.writeHead(200, { 'content-type': 'text/plain' });
            return res.end('plain text');
          case '/empty':
            res.writeHead(204);
            return res.end();
          case '/status':
            res.writeHead(Number(url.searchParams.get('code')), { 'content-type': 'text/plain' });
            return res.end('status body');
          case '/bad-json':
            res.writeHead(200, { 'content-type': 'application/json' });
            return res.end('<html>oops</html>');
          case '/big':
            res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(HTTP_MAX_BODY_BYTES + 1) });
            return res.end('x'.repeat(HTTP_MAX_BODY_BYTES + 1));
          case '/big-chunked':
            // No content-length: the cap must hold while streaming.
            res.writeHead(200, { 'content-type': 'text/plain' });
            for (let i = 0; i < 5; i++) res.write('y'.repeat(300 * 1024));
            return res.end();
          case '/slow':
            // Never answers; closeAllConnections() in afterAll ends it.
            return;
          default:
            res.writeHead(404);
            return res.end();
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve())));
  });

  it('GETs JSON and parses it, returning status and headers', async () => {
    const res = await runAction(local, { url: `${base}/json` }, ctx());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ hello: 'world', n: [1, 2] });
    expect(res.headers['x-test']).toBe('yes');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(received.at(-1)?.method).toBe('GET');
  });

  it('parses +json content types and returns 4xx as data by default', async () => {
    const res = await runAction(local, { url: `${base}/problem` }, ctx());
    expect(res).toMatchObject({ status: 422, body: { title: 'bad' } });
  });

  it('returns other bodies as text, and an empty body as null when JSON is declared', async () => {
    expect((await runAction(local, { url: `${base}/text` }, ctx())).body).toBe('plain text');
    expect(await runAction(local, { url: `${base}/empty`, method: 'delete' }, ctx())).toMatchObject({ status: 204, body: '' });
  });

  it('sends a JSON body as JSON and a string body as is', async () => {
    await runAction(local, { url: `${base}/json`, method: 'POST', body: { a: 1 }, headers: { 'x-id': '7' } }, ctx());
    expect(received.at(-1)).toMatchObject({ method: 'POST', body: '{"a":1}' });
    expect(received.at(-1)?.headers['content-type']).toBe('application/json');
    expect(received.at(-1)?.headers['x-id']).toBe('7');
    await runAction(local, { url: `${base}/text`, method: 'PUT', body: 'raw=1', headers: { 'content-type': 'text/x-custom' } }, ctx());
    expect(received.at(-1)).toMatchObject({ method: 'PUT', body: 'raw=1' });
    expect(received.at(-1)?.headers['content-type']).toBe('text/x-custom');
  });

  it('refuses a URL that is not http or https, and a body on GET', () => {
    for (const url of ['ftp://example.test/file', 'file:///etc/passwd', 'javascript:alert(1)', 'not a url']) {
      expect(() => validateInput(httpRequest, { url })).toThrow(/input\.url: must be an http:\/\/ or https:\/\/ URL/);
    }
    expect(() => validateInput(httpRequest, { url: `${base}/json`, body: 'x' })).toThrow(/input\.body: a GET or HEAD request cannot have a body/);
    expect(() => validateInput(httpRequest, { url: `${base}/json`, method: 'FETCH' })).toThrow(/input\.method: /);
  });

  it('times out with a retryable HttpTimeout error', async () => {
    const t0 = performance.now();
    const err = await rejection(runAction(local, { url: `${base}/slow`, timeoutMs: 100 }, ctx()));
    expect(err).toBeInstanceOf(ActionError);
    expect(err).toMatchObject({ type: 'HttpTimeout', retryable: true });
    expect((err as Error).message).toMatch(/timed out after 100 ms/);
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it("stops when the caller's signal aborts", async () => {
    const controller = new AbortController();
    const running = runAction(local, { url: `${base}/slow` }, ctx({ signal: controller.signal }));
    setTimeout(() => controller.abort(new Error('cancelled')), 20);
    expect(await rejection(running)).toBeInstanceOf(ActionAbortedError);
  });

  it('refuses bodies over 1 MiB, declared or streamed, as non-retryable', async () => {
    for (const route of ['/big', '/big-chunked']) {
      const err = await rejection(runAction(local, { url: `${base}${route}` }, ctx()));
      expect(err).toMatchObject({ type: 'HttpResponseTooLarge', retryable: false });
      expect((err as Error).message).toMatch(/over the 1048576 byte \(1 MiB\) limit/);
    }
  });

  it('fails on an error status only when asked, retryable for 5xx, 408 and 429', async () => {
    expect((await runAction(local, { url: `${base}/status?code=500` }, ctx())).status).toBe(500);
    const cases: [number, boolean][] = [[500, true], [503, true], [429, true], [408, true], [404, false], [400, false]];
    for (const [code, retryable] of cases) {
      const err = await rejection(runAction(local, { url: `${base}/status?code=${code}`, failOnHttpError: true }, ctx()));
      expect(err).toMatchObject({ type: 'HttpError', retryable });
      expect((err as Error).message).toContain(`answered ${code}`);
    }
  });

  it('says so when a JSON response is not JSON', async () => {
    const err = await rejection(runAction(local, { url: `${base}/bad-json` }, ctx()));
    expect(err).toMatchObject({ type: 'HttpInvalidJson', retryable: false });
    expect((err as Error).message).toContain('"<html>oops</html>"');
  });

  it('turns a refused connection into a retryable network error', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const err = await rejection(runAction(local, { url: `http://127.0.0.1:${port}/` }, ctx()));
    expect(err).toMatchObject({ type: 'HttpNetworkError', retryable: true });
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });
});
