// A worker whose action ignores its abort signal still drains and exits 0 on SIGTERM, soon after
// its shutdown timeout: the run is handed back, and whatever the action still holds (a timer
// here) does not keep the process alive until the watchdog gives the drain up with exit 1.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const FAULT_ACTIONS = path.resolve(import.meta.dirname, '../fixtures/actions/fault-actions.ts');

describe('a drain with an action deaf to its abort signal', () => {
  const t = useTestStore({ beforeClose: () => killAll() });
  const { start, diagnostics, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_NATS_URL: '' }));

  it('hands the run back at the shutdown timeout and exits 0 at once, not after the watchdog', async () => {
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
    const types = (await t.store.readStream(executionStreamId(executionId))).map((e) => e.type);
    expect(types).toContain('OwnershipReleased');
    executor.proc.kill('SIGTERM');
    expect(await executor.exitWithin(20_000), diagnostics()).toBe(0);
  }, 120_000);
});
