// http.request and the addresses it may reach (server-side request forgery): only public ones
// unless BATON_HTTP_ALLOW lists more, checked after DNS resolution and on every redirect, with
// the connection made to the address that was checked. Against real local servers.
import type dns from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import ipaddr from 'ipaddr.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActionError } from '../../src/actions/action.ts';
import { httpRequest } from '../../src/actions/builtin.ts';
import { HTTP_MAX_REDIRECTS, createHttpRequestAction } from '../../src/actions/http-request.ts';
import { nonPublicRange } from '../../src/actions/outbound-address.ts';
import { runAction } from '../../src/actions/registry.ts';
import { ctx, rejection } from './actions.fixtures.ts';


/** A server on 127.0.0.1 that records what reaches it; `/to?url=…&code=…` redirects. */
async function recordingServer() {
  const received: { url: string; method: string; headers: http.IncomingHttpHeaders }[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received.push({ url: req.url ?? '', method: req.method ?? '', headers: req.headers });
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/to') {
        res.writeHead(Number(url.searchParams.get('code') ?? 302), { location: url.searchParams.get('url')! });
        return res.end();
      }
      if (url.pathname === '/loop') {
        res.writeHead(302, { location: '/loop' });
        return res.end();
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: url.pathname, method: req.method }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    received,
    port,
    base: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type Server = Awaited<ReturnType<typeof recordingServer>>;
let a: Server;
let b: Server;
beforeAll(async () => {
  a = await recordingServer();
  b = await recordingServer();
});
afterAll(async () => {
  await a.close();
  await b.close();
});

/** A resolver answering fixed addresses for fixed names (a DNS server the test controls). */
const fakeDns =
  (names: Record<string, string[]>): typeof dns.lookup =>
  ((hostname: string, _options: unknown, callback: (err: Error | null, addresses: dns.LookupAddress[]) => void) => {
    const addresses = names[hostname];
    if (!addresses) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
    callback(null, addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })));
  }) as typeof dns.lookup;

async function expectRefused(action: typeof httpRequest, url: string, address: string) {
  const err = await rejection(runAction(action, { url }, ctx()));
  expect(err, url).toBeInstanceOf(ActionError);
  expect(err, url).toMatchObject({ type: 'HttpAddressRefused', retryable: false });
  expect((err as Error).message, url).toContain(address);
  expect((err as Error).message, url).toContain('BATON_HTTP_ALLOW');
}

describe('http.request by default', () => {
  it('refuses loopback, private, link-local, metadata and unspecified addresses, without connecting', async () => {
    const port = a.port;
    const before = a.received.length;
    const cases: [string, string][] = [
      [`http://127.0.0.1:${port}/`, '127.0.0.1'],
      [`http://127.9.9.9:${port}/`, '127.9.9.9'],
      [`http://2130706433:${port}/`, '127.0.0.1'], // the URL parser makes it 127.0.0.1
      [`http://0x7f.1:${port}/`, '127.0.0.1'],
      [`http://[::1]:${port}/`, '::1'],
      [`http://[::ffff:127.0.0.1]:${port}/`, '::ffff:7f00:1'],
      [`http://0.0.0.0:${port}/`, '0.0.0.0'],
      [`http://[::]:${port}/`, '::'],
      ['http://169.254.169.254/latest/meta-data/', '169.254.169.254'],
      ['http://[fd00:ec2::254]/latest/meta-data/', 'fd00:ec2::254'],
      ['http://100.100.100.200/', '100.100.100.200'],
      ['http://10.1.2.3/', '10.1.2.3'],
      ['http://172.16.0.1/', '172.16.0.1'],
      ['http://192.168.1.1/', '192.168.1.1'],
      ['http://[fe80::1]/', 'fe80::1'],
      ['http://[fc00::1]/', 'fc00::1'],
      ['http://[64:ff9b::7f00:1]/', '64:ff9b::7f00:1'],
    ];
    for (const [url, address] of cases) await expectRefused(httpRequest, url, address);
    expect(a.received.length).toBe(before);
  });

  it('checks names after resolving them: localhost, and a name whose DNS answers a private address', async () => {
    const before = a.received.length;
    await expectRefused(httpRequest, `http://localhost:${a.port}/`, 'localhost');
    const rebinding = createHttpRequestAction({ resolve: fakeDns({ 'innocent.test': ['127.0.0.1'] }) });
    await expectRefused(rebinding, `http://innocent.test:${a.port}/`, 'innocent.test (127.0.0.1)');
    expect(a.received.length).toBe(before);
  });

  it('labels public unicast addresses as public and the rest by their range', () => {
    for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e']) {
      expect(nonPublicRange(ipaddr.process(address)), address).toBeUndefined();
    }
    const ranges: [string, string][] = [
      ['127.0.0.1', 'loopback'],
      ['10.0.0.1', 'private'],
      ['169.254.169.254', 'linkLocal'],
      ['100.64.0.1', 'carrierGradeNat'],
      ['0.0.0.0', 'unspecified'],
      ['::ffff:10.0.0.1', 'private'],
      ['::7f00:1', 'ipv4Compatible'],
      ['2002:7f00:1::', '6to4'],
      ['fe80::1', 'linkLocal'],
      ['fc00::1', 'uniqueLocal'],
      ['224.0.0.1', 'multicast'],
    ];
    for (const [address, range] of ranges) expect(nonPublicRange(ipaddr.process(address)), address).toBe(range);
  });
});

describe('http.request with BATON_HTTP_ALLOW', () => {
  it('reaches what an address, a CIDR range or a host name allows, and nothing beside it', async () => {
    for (const allow of [['127.0.0.1'], ['127.0.0.0/8'], ['::ffff:127.0.0.1']]) {
      const res = await runAction(createHttpRequestAction({ allow }), { url: `${a.base}/ok` }, ctx());
      expect(res, allow[0]).toMatchObject({ status: 200, body: { path: '/ok' } });
    }
    const byName = createHttpRequestAction({ allow: ['localhost'] });
    expect(await runAction(byName, { url: `http://LOCALHOST:${a.port}/named` }, ctx())).toMatchObject({ status: 200 });
    await expectRefused(byName, `${a.base}/literal`, '127.0.0.1'); // the name is allowed, not its address
    await expectRefused(createHttpRequestAction({ allow: ['127.0.0.1'] }), `http://127.0.0.2:${a.port}/`, '127.0.0.2');
  });

  it('connects only to the allowed ones among the addresses a name resolves to', async () => {
    const before = a.received.length;
    const action = createHttpRequestAction({ allow: ['127.0.0.1'], resolve: fakeDns({ 'mixed.test': ['10.0.0.1', '127.0.0.1'] }) });
    expect(await runAction(action, { url: `http://mixed.test:${a.port}/mixed` }, ctx())).toMatchObject({ status: 200, body: { path: '/mixed' } });
    expect(a.received.slice(before).map((r) => r.url)).toEqual(['/mixed']);
  });

  it('checks every redirect: refuses a hop to a refused address, a hop too many and a non-http scheme', async () => {
    const action = createHttpRequestAction({ allow: ['127.0.0.1'] });
    const to = (url: string, code = 302) => `${a.base}/to?code=${code}&url=${encodeURIComponent(url)}`;
    await expectRefused(action, to('http://169.254.169.254/latest/meta-data/'), '169.254.169.254');
    await expectRefused(action, to(`http://[::1]:${a.port}/`), '::1');
    const rebinding = createHttpRequestAction({ allow: ['127.0.0.1'], resolve: fakeDns({ 'metadata.test': ['169.254.169.254'] }) });
    await expectRefused(rebinding, to('http://metadata.test/'), 'metadata.test (169.254.169.254)');

    const loop = await rejection(runAction(action, { url: `${a.base}/loop` }, ctx()));
    expect(loop).toMatchObject({ type: 'HttpTooManyRedirects', retryable: false });
    expect((loop as Error).message).toContain(`more than ${HTTP_MAX_REDIRECTS} redirects`);
    const scheme = await rejection(runAction(action, { url: to('file:///etc/passwd') }, ctx()));
    expect(scheme).toMatchObject({ type: 'HttpRedirectRefused', retryable: false });
  });

  it('follows allowed redirects as fetch would: 303 and POST-after-302 as GET, credentials kept to their origin', async () => {
    const action = createHttpRequestAction({ allow: ['127.0.0.1'] });
    const headers = { authorization: 'Bearer secret', 'x-trace': '1' };
    const before = b.received.length;
    const res = await runAction(
      action,
      { url: `${a.base}/to?code=303&url=${encodeURIComponent(`${b.base}/landed`)}`, method: 'POST', body: { a: 1 }, headers },
      ctx(),
    );
    expect(res).toMatchObject({ status: 200, body: { path: '/landed', method: 'GET' } });
    const landed = b.received.slice(before);
    expect(landed).toHaveLength(1);
    expect(landed[0]!.headers['authorization']).toBeUndefined(); // another origin (another port)
    expect(landed[0]!.headers['x-trace']).toBe('1');
    expect(landed[0]!.headers['content-type']).toBeUndefined();

    const same = await runAction(action, { url: `${a.base}/to?code=307&url=/kept`, method: 'PUT', body: 'x', headers }, ctx());
    expect(same).toMatchObject({ status: 200, body: { path: '/kept', method: 'PUT' } });
    expect(a.received.at(-1)!.headers['authorization']).toBe('Bearer secret');
  });
});
