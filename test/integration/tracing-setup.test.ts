// The README's tracing setup as a user runs it: `baton submit` with NODE_OPTIONS="--import
// ./examples/tracing.mjs" exports its submit span over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT
// (here a receiver in this test), and the execution's first event records that span's context.
// Without the setup, nothing is recorded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  name: string;
}
interface OtlpRequest {
  resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
}

const db = useTestDatabase();

describe('tracing setup (examples/tracing.mjs)', { timeout: 60_000 }, () => {
  const received: OtlpRequest[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') received.push(JSON.parse(body) as OtlpRequest);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  let endpoint = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  const firstEvent = async (id: string) => (await db().pool.query('SELECT metadata FROM baton_events WHERE stream_id = $1 AND revision = 0', [executionStreamId(id)])).rows[0]!.metadata as Record<string, unknown>;

  it('exports the submit span to the OTLP endpoint and records its context in ExecutionRequested', async () => {
    const r = await runBaton(['submit', 'core.noop'], {
      databaseUrl: db().url,
      env: { NODE_OPTIONS: `--import ${path.resolve('examples/tracing.mjs')}`, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint },
    });
    expect(r.code, r.stderr).toBe(0);
    const id = /submitted: ([0-9a-f-]{36})/.exec(r.stdout)![1]!;

    const spans = received.flatMap((q) => q.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: rs.resource })))));
    const submit = spans.find((s) => s.name === 'baton.submit');
    expect(submit, JSON.stringify(received)).toBeDefined();
    expect(submit!.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue).toBe('baton-submit');
    expect((await firstEvent(id)).traceparent).toBe(`00-${submit!.traceId}-${submit!.spanId}-01`);
  });

  it('records no trace context without a setup', async () => {
    const r = await runBaton(['submit', 'core.noop'], { databaseUrl: db().url });
    expect(r.code, r.stderr).toBe(0);
    const id = /submitted: ([0-9a-f-]{36})/.exec(r.stdout)![1]!;
    expect(await firstEvent(id)).not.toHaveProperty('traceparent');
  });
});
