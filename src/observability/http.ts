// The small HTTP server every long-running host exposes: /healthz and /metrics (Prometheus).
import http from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import { listenOn } from './listen.ts';

export interface HealthServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /**
   * The option that asked for `port` (`--metrics-port`), when the user did: a taken port is
   * then refused. Unset, `port` is a default, and a taken one is replaced by a free one.
   */
  portSetting?: string;
  registry: Registry;
  /** Reasons the host is unhealthy; empty when healthy. */
  problems: () => string[];
  log?: Logger;
}

export interface HealthServer {
  url: string;
  close(): Promise<void>;
}

export async function startHealthServer(o: HealthServerOptions): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    void (async () => {
      if (req.method !== 'GET') {
        res.writeHead(405, { allow: 'GET' }).end();
        return;
      }
      if (req.url === '/healthz') {
        const problems = o.problems();
        res.writeHead(problems.length === 0 ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: problems.length === 0, problems }));
      } else if (req.url === '/metrics') {
        // Collected before the status: some collectors ask the database or NATS, and a scrape that
        // fails must not look like a successful one with no series (Prometheus then sets `up` to 0).
        let body: string;
        try {
          body = await o.registry.metrics();
        } catch (err) {
          o.log?.warn({ err }, 'could not collect the metrics for a scrape');
          res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics unavailable: ${(err as Error)?.message ?? String(err)}\n`);
          return;
        }
        res.writeHead(200, { 'content-type': o.registry.contentType }).end(body);
      } else {
        res.writeHead(404).end();
      }
    })().catch((err: unknown) => {
      o.log?.error({ err }, 'health server request failed');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  const { origin } = await listenOn(server, { host: o.host ?? '127.0.0.1', port: o.port, setting: o.portSetting, what: 'the /healthz and /metrics server', log: o.log });
  return {
    url: origin,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
