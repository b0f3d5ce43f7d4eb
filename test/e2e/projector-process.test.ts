// The projector as a real child process next to an executor and a worker: after 1,000
// executions the read model equals a rebuild (`baton projections verify` exits 0); then the
// projector is SIGKILLed in the middle of a batch (its transaction open, checkpoint moved,
// rows not yet written), restarted, and verify still exits 0 with every event counted once.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const FIRST = 1_000;
const SECOND = 200;
const FINAL = `('Completed','Failed','Cancelled','TimedOut','Abandoned')`;

describe('projector process: verify after 1,000 executions and after a SIGKILL mid-batch', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ max: 4, beforeClose: () => killAll() });
  let runtime: ExecutionRuntime;
  const { children, start, diagnostics, killAll } = batonProcesses(() => ({
    BATON_DATABASE_URL: t.db.url,
    ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}),
  }));
  const run = randomUUID().slice(0, 8);

  async function until(what: string, probe: () => Promise<boolean>, ms = 60_000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await probe())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${diagnostics()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const count = async (sql: string, values: unknown[] = []) => Number((await t.db.pool.query<{ n: string }>(sql, values)).rows[0]!.n);
  const finished = () => count(`SELECT count(*) AS n FROM baton_read.executions WHERE status IN ${FINAL}`);

  async function submit(n: number) {
    const kinds = ['core.noop', 'core.sleep', 'core.fail'] as const;
    for (let i = 0; i < n; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, n - i) }, (_, j) => {
          const kind = kinds[(i + j) % kinds.length]!;
          const input = kind === 'core.sleep' ? { ms: (i + j) % 10 } : kind === 'core.fail' ? { message: 'planned', retryable: false } : null;
          return runtime.submit({ action: kind, input, maxAttempts: 1 });
        }),
      );
    }
  }

  async function verifyExitCode(): Promise<number | null> {
    const v = start('verify', ['projections', 'verify']);
    return v.exited;
  }

  beforeAll(async () => {
    runtime = createExecutionRuntime(t.store);
  });

  it('keeps the read model equal to a rebuild through a SIGKILL mid-batch', { timeout: 180_000 }, async () => {
    start('executor', ['executor', '--transport', transport, '--metrics-port', '0']);
    start('worker', ['worker', '--id', `pp-${run}`, '--capacity', '32', '--transport', transport, '--metrics-port', '0']);
    const projector = start('projector', ['projector', '--metrics-port', '0']);

    await submit(FIRST);
    await until(`${FIRST} finished executions in the read model`, async () => (await finished()) === FIRST, 120_000);
    expect(await verifyExitCode()).toBe(0);

    // Hold the executions table so the projector's next batch blocks inside its transaction,
    // after it moved its checkpoint and before its rows are written; then kill it there.
    const blocker = new pg.Client({ connectionString: t.db.url });
    await blocker.connect();
    let killedPid: number | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE baton_read.executions IN SHARE MODE');
      await submit(SECOND);
      await until('the projector blocked mid-batch', async () => {
        const r = await t.db.pool.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'baton-projector'
              AND wait_event_type = 'Lock' AND backend_xid IS NOT NULL AND query ILIKE '%baton_read%executions%'`,
        );
        killedPid = r.rows[0]?.pid;
        return killedPid !== undefined;
      });
      projector.proc.kill('SIGKILL');
      await projector.exited;
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    // The orphaned backend finishes its statement, cannot reply, and its transaction rolls back.
    await until('the killed projector session to end', async () => (await count('SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1', [killedPid])) === 0);

    start('projector-2', ['projector', '--metrics-port', '0']);
    await until(`${FIRST + SECOND} finished executions in the read model`, async () => (await finished()) === FIRST + SECOND, 120_000);
    const events = await count(`SELECT count(*) AS n FROM baton_events WHERE stream_id LIKE 'execution-%'`);
    await until('the timeline to catch up', async () => (await count('SELECT count(*) AS n FROM baton_read.execution_events')) === events);
    await until('the executions checkpoint to catch up', async () => (await count(`SELECT events_applied AS n FROM baton_projection_checkpoints WHERE projection = 'executions'`)) === events);
    expect(await verifyExitCode()).toBe(0);

    // And verify does fail, with exit code 1, when a row is not what the events say.
    await t.db.pool.query(`UPDATE baton_read.action_stats SET completed = completed + 1 WHERE action = 'core.noop'`);
    expect(await verifyExitCode()).toBe(1);
    expect(children.at(-1)!.output.join('')).toMatch(/executions\.action_stats differs:\n  rows that differ: core\.noop/);
  });
});
