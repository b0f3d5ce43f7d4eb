// The NATS connection Baton's hosts and CLI use.
import { connect, Events } from 'nats';
import type { NatsConnection } from 'nats';
import type { Logger } from 'pino';
import { redactUrl } from '../../db/connect.ts';
import { BatonError } from '../../errors.ts';
import { componentLogger } from '../../log.ts';

/** Connect to NATS for Baton: reconnect forever, log connection state changes. The caller closes it. */
export async function connectNats(url: string, log?: Logger): Promise<NatsConnection> {
  let nc: NatsConnection;
  try {
    // noAsyncTraces: nats.js otherwise captures two stack traces (new Error()) for every request,
    // publish acks and pull fetches included: ~2% of a `baton bench` process's CPU (profiled).
    nc = await connect({ servers: url, name: 'baton', maxReconnectAttempts: -1, timeout: 5_000, noAsyncTraces: true });
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
