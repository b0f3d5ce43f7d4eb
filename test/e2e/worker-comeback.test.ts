// A worker the executor declared lost that was only paused (SIGSTOP past the staleness limit,
// then SIGCONT), with real executor and worker processes: it announces itself again (a new
// incarnation), takes work again, and a SIGTERM drains and stops it cleanly (exit 0, its stream
// ends with WorkerStopped), even when the SIGTERM comes before it noticed.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { workerStreamId } from '../../schemas/worker-events.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses, type BatonProcess } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';
import { until } from '../support/until.ts';


describe('a lost worker that comes back (real processes, SIGSTOP / SIGCONT / SIGTERM)', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  const env = () => ({
    BATON_DATABASE_URL: t.db.url,
    ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}),
    // Stale after 3 × 200 ms: a pause of a few seconds gets the worker declared lost.
    BATON_HEARTBEAT_INTERVAL: '200ms',
    BATON_HEARTBEAT_STALE_AFTER: '3',
    BATON_SHUTDOWN_TIMEOUT: '5s',
    // Info, so the test sees "worker running": its signal handlers are in place from then on.
    BATON_LOG_LEVEL: 'info',
  });
  const { start, diagnostics, killAll } = batonProcesses(env);
  const run = randomUUID().slice(0, 8);

  beforeAll(async () => {
    start('executor', ['executor', '--transport', transport, '--metrics-port', '0']);
  });

  const workerEvents = async (id: string) => (await t.store.readStream(workerStreamId(id))).map((e) => e.type);

  /** Started, beating (so an executor can see it go stale) and handling signals. */
  async function startedWorker(id: string): Promise<BatonProcess> {
    const w = start(id, ['worker', '--id', id, '--capacity', '2', '--transport', transport, '--metrics-port', '0']);
    await until(`${id} to run`, async () => w.output.join('').includes('"msg":"worker running"'), 30_000, { everyMs: 50, detail: diagnostics });
    await until(`${id} to beat`, async () => ((await t.db.pool.query('SELECT 1 FROM baton_worker_liveness WHERE worker_id = $1', [id])).rowCount ?? 0) > 0, 10_000, { everyMs: 50, detail: diagnostics });
    return w;
  }

  async function pausedUntilLost(w: BatonProcess, id: string): Promise<void> {
    w.proc.kill('SIGSTOP');
    await until(`${id} declared lost`, async () => (await workerEvents(id)).at(-1) === 'WorkerLost', 20_000, { everyMs: 50, detail: diagnostics });
  }

  async function exitCode(w: BatonProcess): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${w.name} did not exit within 20 s\n${diagnostics()}`)), 20_000);
    });
    try {
      return await Promise.race([w.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  it('announces itself again after SIGCONT, takes work again, and stops cleanly on SIGTERM', { timeout: 120_000 }, async () => {
    const id = `w-stop-1-${run}`;
    const w = await startedWorker(id);
    await pausedUntilLost(w, id);
    w.proc.kill('SIGCONT');
    await until(`${id} to announce itself again`, async () => (await workerEvents(id)).slice(-2).join() === 'WorkerLost,WorkerStarted', 15_000, { everyMs: 50, detail: diagnostics });

    const runtime = createExecutionRuntime(t.store);
    const { executionId } = await runtime.submit({ action: 'core.echo', input: { back: true } });
    await until('the execution to complete', async () => (await t.store.readStream(executionStreamId(executionId))).at(-1)?.type === 'ExecutionCompleted', 20_000, { everyMs: 50, detail: diagnostics });
    const events = await t.store.readStream(executionStreamId(executionId));
    expect(events.find((e) => e.type === 'ExecutionStarted')?.metadata.by).toBe(`worker:${id}`);

    w.proc.kill('SIGTERM');
    expect(await exitCode(w), diagnostics()).toBe(0);
    expect(await workerEvents(id)).toEqual(['WorkerStarted', 'WorkerLost', 'WorkerStarted', 'WorkerDraining', 'WorkerStopped']);
    expect(w.output.join(''), 'no refusal in its log').not.toMatch(/refused in state Lost/);
  });

  it('stops cleanly when SIGTERM arrives right as it resumes, before it noticed it was declared lost', { timeout: 120_000 }, async () => {
    const id = `w-stop-2-${run}`;
    const w = await startedWorker(id);
    await pausedUntilLost(w, id);
    w.proc.kill('SIGCONT');
    w.proc.kill('SIGTERM');
    expect(await exitCode(w), diagnostics()).toBe(0);
    const types = await workerEvents(id);
    expect(types.slice(0, 3)).toEqual(['WorkerStarted', 'WorkerLost', 'WorkerStarted']);
    expect(types.slice(-2)).toEqual(['WorkerDraining', 'WorkerStopped']);
  });
});
