// The NATS connection Baton's hosts and CLI use.
import { connect, Events } from 'nats';
import type { NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { redactUrl } from '../../db/connect.ts';
import { BatonError } from '../../errors.ts';
import { componentLogger } from '../../log.ts';

const NATS_PING_INTERVAL_MS = 10_000;
const NATS_MAX_PINGS_OUT = 3;

/** Connect to NATS for Baton: reconnect forever, log connection state changes. The caller closes it. */
export async function connectNats(url: string, log?: Logger, o: { pingIntervalMs?: number } = {}): Promise<NatsConnection> {
  let nc: NatsConnection;
  try {
    // noAsyncTraces: nats.js otherwise captures two stack traces (new Error()) for every request,
    // publish acks and pull fetches included: ~2% of a `baton bench` process's CPU (profiled).
    // pingInterval / maxPingOut: a connection whose server stops answering while its TCP stays open
    // (a stalled path, a frozen server) is dropped and reconnected after 30–40 s, where nats.js's
    // defaults (a ping every two minutes, two outstanding) left it "connected" for 4–6 minutes.
    nc = await connect({
      servers: url,
      name: 'baton',
      maxReconnectAttempts: -1,
      timeout: 5_000,
      noAsyncTraces: true,
      pingInterval: o.pingIntervalMs ?? NATS_PING_INTERVAL_MS,
      maxPingOut: NATS_MAX_PINGS_OUT,
    });
  } catch (err) {
    throw new BatonError(`cannot connect to NATS at ${redactUrl(url)} (BATON_NATS_URL): ${(err as Error).message}`, { cause: err });
  }
  if (log) {
    const nlog = componentLogger(log, 'nats');
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === Events.Disconnect || s.type === Events.Error) nlog.warn({ status: s.type, data: String(s.data) }, 'NATS connection status');
        else if (s.type === Events.Reconnect) nlog.info({ status: s.type, data: String(s.data) }, 'NATS reconnected');
      }
    })().catch(() => undefined);
  }
  return nc;
}
