// Two `baton worker` processes on one machine (real processes, one database): both start —
// the second moves off the metrics port the first holds — and both get work. A worker asking
// for a port or an id another live process holds is refused in one line, before it has
// announced anything (no WorkerStarted, no liveness row, no work handed to it).
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const FAST = { BATON_HEARTBEAT_INTERVAL: '500ms', BATON_SHUTDOWN_TIMEOUT: '2s', BATON_SCHEDULE_TO_START_TIMEOUT: '5s' };

describe('two workers on one machine', () => {
  const t = useTestStore({
    beforeClose: async () => {
      await killAll();
      squatter.close();
    },
  });
  const { start, killAll, diagnostics } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_NATS_URL: '', ...FAST }));
  const squatter = net.createServer();

  beforeAll(async () => {
    await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
  });

  const workerIds = async () => (await t.db.pool.query<{ worker_id: string; pid: number }>('SELECT worker_id, pid FROM baton_worker_liveness ORDER BY worker_id')).rows;
  const started = async (id: string) => (await t.store.readStream(workerStreamId(id))).filter((e) => e.type === 'WorkerStarted').length;

  it('both start on their default ports and both get work; a taken id or an asked-for taken port is refused before anything is announced', async () => {
    const executor = start('executor', ['executor', '--transport', 'postgres', '--metrics-port', '0']);
    // No --id, no --metrics-port: the defaults (<host>-<pid>, 9465), as a person starts two.
    const w1 = start('worker 1', ['worker', '--transport', 'postgres', '--capacity', '2'], { env: { BATON_LOG_LEVEL: 'info' } });
    await w1.waitFor(/"msg":"worker running"/, 60_000);
    const w2 = start('worker 2', ['worker', '--transport', 'postgres', '--capacity', '2'], { env: { BATON_LOG_LEVEL: 'info' } });
    await w2.waitFor(/"msg":"worker running"/, 60_000);
    // At most one of them has 9465 (another program may hold it); the other says which port it took instead.
    expect(w2.output.join('')).toMatch(/port 9465 \(the default\) is in use; listening on \d+ instead/);
    const ids = (await workerIds()).map((r) => r.worker_id);
    expect(ids).toHaveLength(2);

    const runtime = createExecutionRuntime(t.store);
    const executions = await Promise.all(Array.from({ length: 24 }, () => runtime.submit({ action: 'core.sleep', input: { ms: 150 } }).then((r) => r.executionId)));
    const ranOn = new Set<string>();
    const deadline = Date.now() + 60_000;
    for (const id of executions) {
      for (;;) {
        const { snapshot } = await runtime.load(id);
        if (snapshot.value === 'Completed') {
          ranOn.add(snapshot.context.workerId!);
          break;
        }
        if (Date.now() > deadline) throw new Error(`${id} is ${String(snapshot.value)}\n${diagnostics()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    expect([...ranOn].sort()).toEqual([...ids].sort());

    // The id of a live worker: refused, and that worker's stream and row are untouched.
    const held = ids[0]!;
    const before = await started(held);
    const twin = start('worker (same id)', ['worker', '--id', held, '--transport', 'postgres', '--metrics-port', '0']);
    expect(await twin.exitWithin(30_000)).toBe(1);
    expect(twin.output.join('')).toMatch(new RegExp(`^baton: worker id "${held}" is in use by a live worker \\(pid \\d+ on .*\\): give this worker another id \\(--id, or startWorker's id option\\)`, 'm'));
    expect(await started(held)).toBe(before);
    expect(await workerIds()).toHaveLength(2);

    // A metrics port asked for and taken: one line naming the option, nothing announced.
    const port = (squatter.address() as net.AddressInfo).port;
    const blocked = start('worker (taken port)', ['worker', '--id', 'blocked', '--transport', 'postgres', '--metrics-port', String(port)]);
    expect(await blocked.exitWithin(30_000)).toBe(1);
    expect(blocked.output.join('').trim()).toBe(
      `baton: --metrics-port ${port} is in use by another program (127.0.0.1:${port}); choose another --metrics-port, or 0 for a free one (the /healthz and /metrics server)`,
    );
    expect(await started('blocked')).toBe(0);
    // baton dev's API port asked for and taken: refused in that one line before it opens its database.
    const devDir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-dev-port-'));
    try {
      const dev = start('dev (taken port)', ['dev', '--port', String(port), '--metrics-port', '0'], { cwd: devDir, env: { BATON_DATA_DIR: devDir } });
      expect(await dev.exitWithin(30_000)).toBe(1);
      expect(dev.output.join('').trim()).toBe(`baton: --port ${port} is in use by another program (127.0.0.1:${port}); choose another --port, or 0 for a free one (the GraphQL API)`);
    } finally {
      await fs.rm(devDir, { recursive: true, force: true });
    }

    for (const c of [w1, w2, executor]) c.proc.kill('SIGTERM');
    for (const c of [w1, w2, executor]) expect(await c.exitWithin(20_000), diagnostics()).toBe(0);
  }, 180_000);

  it('gives two baton dev sharing one database (BATON_DATABASE_URL) different worker ids, even from one directory', async () => {
    await t.db.pool.query('DELETE FROM baton_worker_liveness');
    // One directory for both: with BATON_DATABASE_URL a dev keeps nothing there, so it is not refused as a second one.
    const shared = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-dev-shared-'));
    const dirs = [shared, shared];
    try {
      const devs = [];
      for (const [i, dir] of dirs.entries()) {
        const d = start(`dev ${i + 1}`, ['dev', '--workers', '2', '--port', '0', '--metrics-port', '0'], { cwd: dir, env: { BATON_DATA_DIR: dir } });
        await d.waitFor(/Ctrl-C drains and stops\./, 60_000);
        devs.push(d);
      }
      expect(devs[0]!.output.join('')).toMatch(/workers\s+dev-1, dev-2 /);
      expect(devs[1]!.output.join('')).toMatch(/workers\s+dev-3, dev-4 /);
      expect((await workerIds()).map((r) => r.worker_id)).toEqual(['dev-1', 'dev-2', 'dev-3', 'dev-4']);
      for (const d of devs) d.proc.kill('SIGINT');
      for (const d of devs) expect(await d.exitWithin(20_000), diagnostics()).toBe(0);
    } finally {
      await fs.rm(shared, { recursive: true, force: true });
    }
  }, 120_000);
});
