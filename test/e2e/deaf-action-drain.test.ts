// A worker whose action ignores its abort signal still drains and exits 0 on SIGTERM, soon after
// its shutdown timeout, and whatever the action still holds (a timer here) does not keep the
// process alive until the watchdog gives the drain up with exit 1. The run is not handed back
// while its code still runs: the next attempt could then run beside it on another worker. The
// execution stays held until the process is gone, and the executor reclaims it then.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const FAULT_ACTIONS = path.resolve(import.meta.dirname, '../fixtures/actions/fault-actions.ts');

describe('a drain with an action deaf to its abort signal', () => {
  const t = useTestStore({ beforeClose: () => killAll() });
  // Heartbeats every second: a worker is stale, and what it holds reclaimed, 3 s after its last beat.
  const { start, diagnostics, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_NATS_URL: '', BATON_HEARTBEAT_INTERVAL: '1s' }));

  it('keeps the baton past the shutdown timeout, exits 0 at once, and the executor reclaims the run only once the process is gone', async () => {
    const executor = start('executor', ['executor', '--transport', 'postgres', '--metrics-port', '0']);
    const worker = start('worker', ['worker', '--id', 'deaf-1', '--transport', 'postgres', '--metrics-port', '0', '--shutdown-timeout', '1000', '--actions', FAULT_ACTIONS]);
    const runtime = createExecutionRuntime(t.store);
    const { executionId } = await runtime.submit({ action: 'faults.deaf', input: { ms: 120_000 }, maxAttempts: 2 });
    const deadline = Date.now() + 60_000;
    while (!(await t.store.readStream(executionStreamId(executionId))).some((e) => e.type === 'ExecutionStarted')) {
      if (Date.now() > deadline) throw new Error(`never started\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const signalledAt = Date.now();
    worker.proc.kill('SIGTERM');
    expect(await worker.exitWithin(8_000), diagnostics()).toBe(0);
    // The shutdown timeout (1 s), the hand-back, and at most a second more; the watchdog would be 11 s.
    expect(Date.now() - signalledAt).toBeLessThan(6_000);
    const exitedAt = Date.now();
    const history = async () => (await t.store.readStream(executionStreamId(executionId))).map((e) => ({ type: e.type, data: e.data as Record<string, unknown>, at: e.recordedAt.getTime() }));
    expect((await history()).map((e) => e.type)).not.toContain('OwnershipReleased');
    let reclaim: { data: Record<string, unknown>; at: number } | undefined;
    while (!(reclaim = (await history()).find((e) => e.type === 'OwnershipReclaimed'))) {
      if (Date.now() > exitedAt + 30_000) throw new Error(`never reclaimed: ${(await history()).map((e) => e.type).join(' → ')}\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(reclaim.data).toMatchObject({ reason: 'worker-lost', workerId: 'deaf-1', attempt: 1 });
    expect(reclaim.at).toBeGreaterThanOrEqual(exitedAt - 50); // the store's clock and ours: the same machine
    executor.proc.kill('SIGTERM');
    expect(await executor.exitWithin(20_000), diagnostics()).toBe(0);
  }, 120_000);
});
