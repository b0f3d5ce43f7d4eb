// Eager dispatch through a real `baton dev` process (its executor and workers share the process):
// a submission from another process runs with its worker's start committed in the handoff's
// transaction; with BATON_EAGER_DISPATCH=off the same `baton dev` sends it through its queue, and
// the start is a transaction of its own. The history has the same events either way.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

describe('eager dispatch in baton dev', () => {
  const t = useTestStore({ beforeClose: () => killAll() });
  const { start, killAll, diagnostics } = batonProcesses(() => ({ BATON_DATABASE_URL: t.db.url, BATON_NATS_URL: '', BATON_HEARTBEAT_INTERVAL: '500ms', BATON_SHUTDOWN_TIMEOUT: '2s' }));

  async function completed(executionId: string): Promise<StoredEvent[]> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const events = await t.store.readStream(executionStreamId(executionId));
      if (events.at(-1)?.type === 'ExecutionCompleted') return events;
      if (Date.now() > deadline) throw new Error(`not completed: ${events.map((e) => e.type).join(' → ')}\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const transactionsOf = async (events: StoredEvent[]) =>
    (await t.db.pool.query<{ type: string; x: string }>('SELECT type, transaction_id::text AS x FROM baton_events WHERE global_position = ANY($1::bigint[]) ORDER BY global_position', [events.map((e) => String(e.globalPosition))])).rows;

  it.each([
    ['on (the default)', {}, true],
    ['off', { BATON_EAGER_DISPATCH: 'off' }, false],
  ] as const)('BATON_EAGER_DISPATCH %s', async (_, env, eager) => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-test-eager-'));
    try {
      const dev = start('dev', ['dev', '--workers', '1', '--port', '0', '--metrics-port', '0'], { cwd: dir, env: { BATON_DATA_DIR: dir, ...env } });
      await dev.waitFor(/Ctrl-C drains and stops\./, 60_000);
      const runtime = createExecutionRuntime(t.store);
      const ids = await Promise.all(Array.from({ length: 5 }, (_, i) => runtime.submit({ action: 'core.echo', input: { i } }).then((r) => r.executionId)));
      for (const id of ids) {
        const events = await completed(id);
        expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
        const tx = await transactionsOf(events);
        const handoff = tx.find((r) => r.type === 'ExecutionHandedOff')!.x;
        const start = tx.find((r) => r.type === 'ExecutionStarted')!.x;
        expect(start === handoff, `${id}: start in the handoff's transaction`).toBe(eager);
      }
      dev.proc.kill('SIGINT');
      expect(await dev.exitWithin(20_000), diagnostics()).toBe(0);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
