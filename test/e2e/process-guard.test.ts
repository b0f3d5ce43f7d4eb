// A worker process whose action ends it behind Baton's back (src/cli/process-guard.ts): an
// exception thrown from a timer is a fatal log line naming the worker and its runs, the worker's
// liveness row is made stale at once (the executor reclaims without waiting out the staleness
// limit), and the exit code is 1; an action's process.exit(0) is said so and exits 1, not 0,
// so a restart-on-failure supervisor brings the worker back.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';

const ACTIONS = path.resolve(import.meta.dirname, '../fixtures/actions/process-ending-actions.ts');

describe('a worker process ended by its action', () => {
  const t = useTestStore({ beforeClose: () => killAll() });
  const { start, diagnostics, killAll } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_NATS_URL: '' }));
  const fatalLines = (output: string[]) =>
    output
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{') && JSON.parse(l).level === 60)
      .map((l) => JSON.parse(l) as { msg: string; workers: { workerId: string; inFlight: number }[]; err?: { message: string } });

  async function runOn(workerId: string, action: string) {
    const worker = start(workerId, ['worker', '--id', workerId, '--transport', 'postgres', '--metrics-port', '0', '--actions', ACTIONS]);
    const { executionId } = await createExecutionRuntime(t.store).submit({ action, input: null, maxAttempts: 1 });
    await until(`${action} to start`, async () => (await t.store.readStream(executionStreamId(executionId))).some((e) => e.type === 'ExecutionStarted'), 30_000);
    return { worker, executionId };
  }

  it('an uncaught exception: a fatal line naming the worker and its run, its liveness row stale at once, exit 1', async () => {
    const executor = start('executor', ['executor', '--transport', 'postgres', '--metrics-port', '0']);
    const { worker } = await runOn('ends-by-throw', 'ending.timer-throw');
    expect(await worker.exitWithin(15_000), diagnostics()).toBe(1);
    const [fatal, ...more] = fatalLines(worker.output);
    expect(more, diagnostics()).toEqual([]);
    expect(fatal).toMatchObject({ err: { message: 'thrown from a timer in an action' }, workers: [{ workerId: 'ends-by-throw', inFlight: 1 }] });
    expect(fatal!.msg).toMatch(/^an uncaught exception .*exiting with code 1/);
    expect(worker.output.join('')).toContain('baton: fatal: Error: thrown from a timer in an action (uncaughtException); exiting\n');
    const { rows } = await t.db.pool.query(`SELECT now() - heartbeat_at > interval '1 hour' AS expired FROM baton_worker_liveness WHERE worker_id = 'ends-by-throw'`);
    expect(rows).toEqual([{ expired: true }]);
    executor.proc.kill('SIGTERM');
    expect(await executor.exitWithin(20_000), diagnostics()).toBe(0);
  }, 90_000);

  it('process.exit(0) in an action: said so, and exit code 1 rather than 0', async () => {
    const executor = start('executor', ['executor', '--transport', 'postgres', '--metrics-port', '0']);
    const { worker } = await runOn('ends-by-exit', 'ending.exit-zero');
    expect(await worker.exitWithin(15_000), diagnostics()).toBe(1);
    expect(fatalLines(worker.output)).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/exiting with code 0 though no stop signal came/), workers: [{ workerId: 'ends-by-exit', inFlight: 1 }] }),
    ]);
    executor.proc.kill('SIGTERM');
    expect(await executor.exitWithin(20_000), diagnostics()).toBe(0);
  }, 90_000);
});
