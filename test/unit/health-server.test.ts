// The /healthz and /metrics server of every host (src/observability/http.ts).
import { Gauge, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { startHealthServer, type HealthServer } from '../../src/observability/http.ts';

describe('health server', () => {
  let server: HealthServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('answers a scrape whose collectors fail with 503 and why, not 200 with no series', async () => {
    const registry = new Registry();
    let down = false;
    new Gauge({
      name: 'test_depth',
      help: 'asks a server that may be down',
      registers: [registry],
      collect() {
        if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        this.set(3);
      },
    });
    server = await startHealthServer({ port: 0, registry, problems: () => [] });
    const up = await fetch(`${server.url}/metrics`);
    expect(up.status).toBe(200);
    expect(await up.text()).toMatch(/^test_depth 3$/m);
    down = true;
    const failed = await fetch(`${server.url}/metrics`);
    expect(failed.status).toBe(503);
    expect(await failed.text()).toBe('metrics unavailable: connect ECONNREFUSED 127.0.0.1:5432\n');
  });

  it('answers /healthz with 503 and the problems, 200 without', async () => {
    const problems: string[] = [];
    server = await startHealthServer({ port: 0, registry: new Registry(), problems: () => problems });
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    problems.push('the database is unreachable');
    const r = await fetch(`${server.url}/healthz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ ok: false, problems: ['the database is unreachable'] });
  });
});
