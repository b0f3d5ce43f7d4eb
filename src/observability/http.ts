// The small HTTP server every long-running host exposes: /healthz and /metrics (Prometheus).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';

export interface HealthServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port: number;
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
        res.writeHead(200, { 'content-type': o.registry.contentType });
        res.end(await o.registry.metrics());
      } else {
        res.writeHead(404).end();
      }
    })().catch((err: unknown) => {
      o.log?.error({ err }, 'health server request failed');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
