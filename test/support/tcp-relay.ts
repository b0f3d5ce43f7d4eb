// A TCP relay in front of a server (Postgres, EventStoreDB) whose connections a test can cut, and
// which it can stop listening on and start again on the same port: the way a server restart or a
// network fault looks to a client.
import net from 'node:net';

export interface TcpRelay {
  /** The target's URL with the relay's address in its place. */
  url: string;
  /** Cut every open connection (new ones still pass). */
  cut(): void;
  /** Cut every connection and stop listening: connections are refused until reopen(). */
  down(): Promise<void>;
  /** Listen again on the same port. */
  reopen(): Promise<void>;
  close(): Promise<void>;
  /** Stop passing bytes either way, connections left open (new ones are accepted and held too): a network stall. */
  stall(): void;
  /** Pass bytes again, what was held included. */
  resume(): void;
  /** How many connections it has accepted so far. */
  accepted(): number;
}

export async function startRelay(target: URL, defaultPort: number): Promise<TcpRelay> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let stalled = false;
  let accepted = 0;
  const flow = ([inbound, outbound]: [net.Socket, net.Socket]) => inbound.pipe(outbound).pipe(inbound);
  const server = net.createServer((inbound) => {
    const outbound = net.connect(Number(target.port || defaultPort), target.hostname);
    const pair: [net.Socket, net.Socket] = [inbound, outbound];
    accepted++;
    pairs.add(pair);
    for (const s of pair) {
      sockets.add(s);
      s.on('close', () => (sockets.delete(s), pairs.delete(pair)));
      s.on('error', () => undefined);
    }
    if (stalled) pair.forEach((s) => s.pause());
    else flow(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const via = new URL(target.toString());
  via.host = `127.0.0.1:${port}`;
  const cut = () => sockets.forEach((s) => s.destroy());
  const down = () => new Promise<void>((resolve) => (cut(), server.close(() => resolve())));
  return {
    url: via.toString(),
    cut,
    down,
    reopen: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
    close: () => (server.listening ? down() : (cut(), Promise.resolve())),
    stall: () => {
      stalled = true;
      for (const [inbound, outbound] of pairs) {
        inbound.unpipe(outbound);
        outbound.unpipe(inbound);
        inbound.pause();
        outbound.pause();
      }
    },
    accepted: () => accepted,
    resume: () => {
      stalled = false;
      pairs.forEach(flow);
    },
  };
}
