// Listening on a TCP port the way every host does: a port the user asked for (an option or a
// variable) is that port or nothing — taken, the host refuses to start in one line naming the
// setting —, while a taken default port is swapped for a free one and the swap is logged, so
// a second host on one machine (two workers, two `baton dev`) starts instead of crashing.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { BatonError } from '../errors.ts';

/** The port a host was asked to use could not be had; the message names the setting. */
export class PortUnavailableError extends BatonError {}

export interface ListenOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * What asked for `port` (`--metrics-port`, `BATON_API_PORT`), or undefined when it is a
   * default: then a taken port is replaced by a free one.
   */
  setting?: string;
  /** What listens, for messages: `the metrics server`, `the GraphQL API`. */
  what: string;
  log?: Logger;
}

/** Listen, and return where. Throws PortUnavailableError naming `setting` when the port cannot be had. */
export async function listenOn(server: http.Server, o: ListenOptions): Promise<{ address: string; port: number; origin: string }> {
  try {
    await listen(server, o.port, o.host);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' && o.setting === undefined) {
      await listen(server, 0, o.host);
      const chosen = (server.address() as AddressInfo).port;
      o.log?.warn({ port: o.port, chosen }, `${o.what}: port ${o.port} (the default) is in use; listening on ${chosen} instead`);
    } else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EADDRNOTAVAIL') {
      // The host is wrong, not the port: another port would not help.
      const why = code === 'EADDRNOTAVAIL' ? 'is not an address of this machine' : `does not resolve to an address (${code})`;
      throw new PortUnavailableError(`${o.what} cannot listen on ${o.host}: it ${why}; choose another address (127.0.0.1, 0.0.0.0 or one of this machine's)`, { cause: err });
    } else {
      const asked = o.setting ? `${o.setting} ${o.port}` : `port ${o.port}`;
      const why =
        code === 'EADDRINUSE'
          ? `is in use by another program (${o.host}:${o.port})`
          : code === 'EACCES'
            ? `needs privileges this process does not have (${o.host}:${o.port})`
            : `cannot be had (${o.host}:${o.port}): ${(err as Error).message}`;
      throw new PortUnavailableError(`${asked} ${why}; choose another${o.setting ? ` ${o.setting}` : ''}, or 0 for a free one (${o.what})`, {
        cause: err,
      });
    }
  }
  const { address, port } = server.address() as AddressInfo;
  return { address, port, origin: `http://${address.includes(':') ? `[${address}]` : address}:${port}` };
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => {
      server.off('listening', onListening);
      reject(err);
    };
    const onListening = () => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/**
 * Refuse now, naming the setting, when a port the user asked for (`setting` given) is taken:
 * for a host that binds it only after its database is up (the GraphQL API), so the refusal comes
 * before an embedded Postgres starts and migrations run. A default port needs no check: a taken
 * one is swapped when it binds. A port taken between this check and the bind still fails there.
 */
export async function refuseIfTaken(o: Omit<ListenOptions, 'log'>): Promise<void> {
  if (o.setting === undefined || o.port === 0) return;
  const probe = http.createServer();
  await listenOn(probe, o);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
