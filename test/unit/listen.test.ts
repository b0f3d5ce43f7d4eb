// Ports (src/observability/listen.ts): a taken default port is swapped for a free one and the
// swap logged; a port the user asked for is that port or a one-line refusal naming the setting.
import http from 'node:http';
import net from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { listenOn, PortUnavailableError, refuseIfTaken } from '../../src/observability/listen.ts';

const servers: (http.Server | net.Server)[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function squat(): Promise<number> {
  const s = net.createServer();
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as net.AddressInfo).port;
}

describe('listenOn', () => {
  it('listens on a taken default port\'s replacement, and logs which', async () => {
    const taken = await squat();
    const lines: { msg: string; port: number; chosen: number }[] = [];
    const log = pino(new Writable({ write: (c: Buffer, _e, done) => (lines.push(JSON.parse(c.toString())), done()) }));
    const server = http.createServer();
    servers.push(server);
    const { port, origin } = await listenOn(server, { host: '127.0.0.1', port: taken, what: 'the metrics server', log });
    expect(port).not.toBe(taken);
    expect(origin).toBe(`http://127.0.0.1:${port}`);
    expect(lines).toEqual([expect.objectContaining({ port: taken, chosen: port, msg: `the metrics server: port ${taken} (the default) is in use; listening on ${port} instead` })]);
  });

  it('refuses a taken port the user asked for, in one line naming the option', async () => {
    const taken = await squat();
    const server = http.createServer();
    const err = await listenOn(server, { host: '127.0.0.1', port: taken, setting: '--metrics-port', what: 'the metrics server' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PortUnavailableError);
    expect((err as Error).message).toBe(
      `--metrics-port ${taken} is in use by another program (127.0.0.1:${taken}); choose another --metrics-port, or 0 for a free one (the metrics server)`,
    );
    expect(server.listening).toBe(false);
  });

  it('blames the host, not the port, when the host does not resolve or is not this machine\'s', async () => {
    for (const [host, why] of [
      ['bogus.invalid', /^the metrics server cannot listen on bogus\.invalid: it does not resolve to an address \((ENOTFOUND|EAI_AGAIN)\); choose another address/],
      ['192.0.2.1', /^the metrics server cannot listen on 192\.0\.2\.1: it is not an address of this machine; choose another address/],
    ] as const) {
      const server = http.createServer();
      const err = await listenOn(server, { host, port: 0, setting: '--metrics-port', what: 'the metrics server' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PortUnavailableError);
      expect((err as Error).message).toMatch(why);
      expect((err as Error).message).not.toMatch(/--metrics-port/);
    }
  });

  it('refuseIfTaken: refuses a taken port asked for, leaves a free one free, and checks no default', async () => {
    const taken = await squat();
    await expect(refuseIfTaken({ host: '127.0.0.1', port: taken, setting: '--port', what: 'the GraphQL API' })).rejects.toThrow(
      `--port ${taken} is in use by another program (127.0.0.1:${taken}); choose another --port, or 0 for a free one (the GraphQL API)`,
    );
    await expect(refuseIfTaken({ host: '127.0.0.1', port: taken, what: 'the GraphQL API' })).resolves.toBeUndefined();
    const free = await squat();
    const held = servers.pop()!;
    await new Promise((resolve) => held.close(resolve));
    await refuseIfTaken({ host: '127.0.0.1', port: free, setting: '--port', what: 'the GraphQL API' });
    // The probe let go of it: the real server binds it.
    const server = http.createServer();
    expect((await listenOn(server, { host: '127.0.0.1', port: free, setting: '--port', what: 'the GraphQL API' })).port).toBe(free);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
});
