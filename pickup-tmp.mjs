// Stage timings of the light-load pickup path, from the events' occurredAt (JS clock at decision).
import pg from 'pg';
import pino from 'pino';
import { z } from 'zod';
import { randomUUID } from 'node:crypto';
const D = '/work/main/dist/src';
const { createActionRegistry, defineAction } = await import(`${D}/actions/index.js`);
const { createPostgresEventStore } = await import(`${D}/eventstore/postgres.js`);
const { createExecutionRuntime } = await import(`${D}/runtime/execution-runtime.js`);
const { connectNats, createNatsWorkTransport } = await import(`${D}/transport/nats/index.js`);
const { createPostgresWorkTransport } = await import(`${D}/transport/postgres/index.js`);
const { startInProcessHosts } = await import(`${D}/bench/in-process-hosts.js`);
const { withScratchDatabase } = await import(`${D}/bench/scratch-database.js`);
const admin = new pg.Pool({ connectionString: process.env.BATON_DATABASE_URL, max: 2 });
const kind = process.argv[2] ?? 'nats';
await withScratchDatabase({ pool: admin, databaseUrl: process.env.BATON_DATABASE_URL }, 24, async ({ pool, url }) => {
  const clientPool = new pg.Pool({ connectionString: url, max: 8 }); clientPool.on('error', () => {});
  const client = createExecutionRuntime(createPostgresEventStore(clientPool));
  const store = createPostgresEventStore(pool);
  const suffix = randomUUID().slice(0, 8);
  let nc; let transport;
  if (kind === 'nats') { nc = await connectNats(process.env.BATON_NATS_URL); transport = await createNatsWorkTransport(nc, { streamName: `PK_${suffix}`, subjectPrefix: `pk.${suffix}` }); }
  else transport = createPostgresWorkTransport(pool);
  const started = new Map();
  const mark = defineAction({ name: 'bench.mark', input: z.object({ token: z.string() }), run: ({ token }) => { started.get(token)?.(performance.now() + performance.timeOrigin); return null; } });
  const hosts = await startInProcessHosts({ store, pool, transport, actions: createActionRegistry([mark]), workerIds: [`pk-${suffix}`], capacity: 50, log: pino({ level: 'silent' }), projector: process.env.NOPROJ !== '1' });
  const rows = [];
  for (let i = 0; i < Number(process.argv[3] ?? 100); i++) {
    const token = randomUUID();
    const at = new Promise((r) => started.set(token, r));
    const t0 = performance.now() + performance.timeOrigin;
    const { executionId } = await client.submit({ action: 'bench.mark', input: { token } });
    const t1 = performance.now() + performance.timeOrigin;
    const t2 = await at;
    rows.push({ executionId, t0, t1, t2 });
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 300));
  const stage = {};
  for (const r of rows) {
    const ev = (await pool.query(`SELECT type, metadata->>'occurredAt' AS at, recorded_at FROM baton_events WHERE stream_id = $1 ORDER BY revision`, ['execution-' + r.executionId])).rows;
    const t = (type) => Date.parse(ev.find((e) => e.type === type)?.at);
    const add = (k, v) => (stage[k] ??= []).push(v);
    add('submit call→return', r.t1 - r.t0);
    add('submit→SchedulingStarted decided', t('SchedulingStarted') - r.t0);
    add('SchedulingStarted→Started decided', t('ExecutionStarted') - t('SchedulingStarted'));
    add('Started decided→action runs', r.t2 - t('ExecutionStarted'));
    add('total', r.t2 - r.t0);
  }
  for (const [k, v] of Object.entries(stage)) { v.sort((a, b) => a - b); console.log(k.padEnd(40), 'p50', v[Math.floor(v.length / 2)].toFixed(2), 'p90', v[Math.floor(v.length * 0.9)].toFixed(2), 'p99', v[Math.floor(v.length * 0.99)].toFixed(2)); }
  await hosts.stop(); await transport.close(); await nc?.close(); await store.close(); await clientPool.end();
});
await admin.end();
