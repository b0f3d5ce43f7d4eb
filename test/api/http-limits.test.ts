// What one client can take from the API host, over real sockets: header and body timeouts
// (slow clients are cut off), the connection cap (more are refused while the open ones are
// served), subscription caps per client and in all, subscriptions to ids that never exist, and
// short answers to malformed bodies.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import pino from 'pino';
import { Agent } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { gql, openSse, useApi } from './api-harness.ts';

const LIST = JSON.stringify({ query: '{ workers { id } }' });
const hostPort = (url: string) => {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
};

/** A raw connection: `closed` resolves (with what the server sent) when the server ends it. */
async function connect(url: string) {
  const socket = net.connect(hostPort(url));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk) => (received += chunk.toString('utf8')));
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.on('error', () => undefined);
  return { socket, closed, received: () => received };
}

const within = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);

describe('a client that hangs up mid-request', () => {
  const lines: { level: number; msg: string }[] = [];
  const api = useApi({ log: pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) }) });

  it('is logged at debug as the client hanging up, not as the database being unavailable', async () => {
    const conn = await connect(api().url);
    conn.socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"query":');
    await new Promise((resolve) => setTimeout(resolve, 200));
    conn.socket.destroy();
    await expect.poll(() => lines.some((l) => l.msg === 'the client hung up before its request was read'), { timeout: 5_000 }).toBe(true);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });
});

describe('slow clients', () => {
  const api = useApi({ limits: { headersTimeoutMs: 500, requestTimeoutMs: 1_000, keepAliveTimeoutMs: 300 } });

  it('are cut off when their headers trickle in, while the server keeps serving', async () => {
    const slow = await connect(api().url);
    const started = Date.now();
    slow.socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\n');
    const drip = setInterval(() => slow.socket.writable && slow.socket.write('X-Drip: 1\r\n'), 100);
    try {
      expect((await gql(api().url, '{ workers { id } }')).status).toBe(200);
      await within(slow.closed, 5_000, 'the slow connection to be closed');
      expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    } finally {
      clearInterval(drip);
      slow.socket.destroy();
    }
  });

  it('are cut off when they connect and send nothing', async () => {
    const idle = await connect(api().url);
    try {
      await within(idle.closed, 5_000, 'the idle connection to be closed');
    } finally {
      idle.socket.destroy();
    }
  });

  it('have an idle kept-alive connection closed after the keep-alive timeout', async () => {
    const conn = await connect(api().url);
    try {
      conn.socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\n\r\n${LIST}`);
      const answered = Date.now();
      const all = await within(conn.closed, 3_000, 'the idle kept-alive connection to be closed');
      expect(all).toMatch(/^HTTP\/1\.1 200[\s\S]*\r\nKeep-Alive: timeout=0\r\n/i); // whole seconds: 300 ms is 0 (the default, 5 s, would say 5)
      expect(Date.now() - answered).toBeLessThan(3_000);
    } finally {
      conn.socket.destroy();
    }
  });

  it('are cut off when their body trickles in (408)', async () => {
    const slow = await connect(api().url);
    slow.socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\n\r\n`);
    let sent = 0;
    const drip = setInterval(() => slow.socket.writable && sent < LIST.length - 1 && slow.socket.write(LIST[sent++]!), 100);
    try {
      const answer = await within(slow.closed, 5_000, 'the slow body to be cut off');
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      clearInterval(drip);
      slow.socket.destroy();
    }
  });

  it('are not cut off for holding a subscription open longer than the request timeout', async () => {
    const { runtime } = api();
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    const sub = await openSse(api().url, `subscription($id: ID!) { executionUpdated(id: $id) { status } }`, { id: executionId });
    try {
      expect((await sub.next())!.data.data.executionUpdated.status).toBe('Requested');
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // past requestTimeout, which covers receiving the request only
      await runtime.dispatch(executionId, { type: 'ExecutionCancelled', data: { reason: 'test' }, by: 'executor' });
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated.status).toBe('Cancelled');
    } finally {
      await sub.close();
    }
  });
});

describe('the connection cap', () => {
  const api = useApi({ limits: { maxConnections: 3 } });

  it('refuses connections past it while the open ones are served, and takes new ones once one closes', async () => {
    const held = [await connect(api().url), await connect(api().url), await connect(api().url)];
    try {
      const refused = await connect(api().url);
      await within(refused.closed, 5_000, 'the 4th connection to be closed');
      expect(refused.received()).toBe('');
      // One of the three still gets its answer.
      held[0]!.socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\nconnection: close\r\n\r\n${LIST}`);
      expect(await within(held[0]!.closed, 5_000, 'the answer')).toMatch(/^HTTP\/1\.1 200[\s\S]*"workers":\[\]/);
      const again = await connect(api().url);
      again.socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${LIST.length}\r\nconnection: close\r\n\r\n${LIST}`);
      expect(await within(again.closed, 5_000, 'the answer on a new connection')).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      for (const h of held) h.socket.destroy();
    }
  });
});

describe('subscription caps', () => {
  const api = useApi({ limits: { maxSubscriptions: 3, maxSubscriptionsPerClient: 2 } });
  const SUB = `subscription($id: ID!) { executionUpdated(id: $id) { status } }`;
  // Another client: the same machine, from 127.0.0.2.
  const elsewhere = new Agent({ localAddress: '127.0.0.2' });
  afterAll(() => elsewhere.close());

  it('refuse one subscription too many per client and in all, naming the cap, and free a slot when one ends', async () => {
    const { runtime } = api();
    const { executionId: id } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    const open = [await openSse(api().url, SUB, { id }), await openSse(api().url, SUB, { id })];
    try {
      for (const sub of open) expect((await sub.next())!.data.data.executionUpdated.status).toBe('Requested');
      const third = await openSse(api().url, SUB, { id });
      const refusal = await third.next();
      await third.close();
      expect(refusal!.data.errors[0].extensions.code).toBe('LIMIT_EXCEEDED');
      expect(refusal!.data.errors[0].message).toMatch(/already has 2 subscriptions open.*BATON_API_MAX_SUBSCRIPTIONS_PER_CLIENT/);

      open.push(await openSse(api().url, SUB, { id }, { dispatcher: elsewhere }));
      const other = await open[2]!.next();
      expect(other!.data.data?.executionUpdated?.status, JSON.stringify(other)).toBe("Requested");
      const fourth = await openSse(api().url, SUB, { id }, { dispatcher: elsewhere });
      const full = await fourth.next();
      await fourth.close();
      expect(full!.data.errors[0].message).toMatch(/the server has 3 subscriptions open.*BATON_API_MAX_SUBSCRIPTIONS\)/);

      await open.shift()!.close();
      const freed = await eventuallyOpen(() => openSse(api().url, SUB, { id }));
      open.push(freed);
    } finally {
      for (const sub of open) await sub.close();
    }
  });

  /** The server frees a slot when it sees the client gone: retry for a moment. */
  async function eventuallyOpen(open: () => ReturnType<typeof openSse>) {
    const until = Date.now() + 5_000;
    for (;;) {
      const sub = await open();
      const first = await sub.next();
      if (first?.data.data?.executionUpdated) return sub;
      await sub.close();
      if (Date.now() > until) throw new Error(`no slot was freed: ${JSON.stringify(first)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
});

describe('a subscription to an execution that does not exist', () => {
  const api = useApi({ unknownExecutionGraceMs: 300 });
  const SUB = `subscription($id: ID!) { executionUpdated(id: $id) { id status } }`;

  it('ends with NOT_FOUND after the grace period', async () => {
    const id = randomUUID();
    const sub = await openSse(api().url, SUB, { id });
    try {
      const started = Date.now();
      const first = await sub.next(5_000);
      expect(first!.data.errors[0].extensions.code).toBe('NOT_FOUND');
      expect(first!.data.errors[0].message).toMatch(new RegExp(`^no execution ${id}: the event store has none`));
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect((await sub.next())?.event).toBe('complete');
    } finally {
      await sub.close();
    }
  });

  it('keeps waiting past the grace period for one the event store has and the read model does not show yet', async () => {
    const { executionId: id } = await api().runtime.submit({ action: 'core.noop' });
    const sub = await openSse(api().url, SUB, { id });
    try {
      await expect(sub.next(800)).rejects.toThrow(/no SSE event/);
      await api().catchUp();
      expect((await sub.next())!.data.data.executionUpdated).toEqual({ id, status: 'Requested' });
    } finally {
      await sub.close();
    }
  });
});

describe('a malformed body', () => {
  const api = useApi();

  it('gets a short fixed 400, not the body back', async () => {
    const body = `{"query": "${'x'.repeat(60 * 1024)}`;
    const res = await fetch(api().url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text.length).toBeLessThan(200);
    expect(JSON.parse(text)).toEqual({ errors: [{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }] });
  });
});
