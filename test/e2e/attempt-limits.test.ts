// Attempt limits end to end, with real processes: an executor and a worker whose action sets
// retry.maxAttempts 5, and submissions through the `baton submit` command line. The action's
// limit is the default; a submission's --max-attempts may lower it, never raise it.
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { runBaton } from '../support/cli.ts';
import { useTestStore } from '../support/test-store.ts';

describe('attempt limits (real executor and worker processes, baton submit)', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  const env = () => ({ BATON_DATABASE_URL: t.db.url, ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}) });
  const { start, diagnostics, killAll } = batonProcesses(env);

  beforeAll(async () => {
    start('executor', ['executor', '--transport', transport, '--metrics-port', '0']);
    start('worker', ['worker', '--id', `limits-${randomUUID().slice(0, 8)}`, '--transport', transport, '--metrics-port', '0', '--actions', 'test/fixtures/actions/retry-actions.ts']);
  });

  /** Submit through the CLI and wait for the end; the attempts started, from the history. */
  async function submitAndWait(extra: string[]): Promise<{ status: string; attempt: number; started: number[]; limits: unknown[] }> {
    const r = await runBaton(['submit', 'retry.always-fails', '--actions', 'test/fixtures/actions/retry-actions.ts', '--input', '{}', '--wait', '--timeout', '45000', '--json', ...extra], { databaseUrl: t.db.url, env: env() });
    expect(r.code, `${r.stderr}\n${diagnostics()}`).toBe(1); // waited to the end, and it did not complete
    const out = JSON.parse(r.stdout) as { executionId: string; status: string; attempt: number };
    const events = await t.store.readStream(executionStreamId(out.executionId));
    return {
      status: out.status,
      attempt: out.attempt,
      started: events.filter((e) => e.type === 'ExecutionStarted').map((e) => (e.data as { attempt: number }).attempt),
      // Recorded on each handoff (machine version 7; SchedulingStarted recorded it before).
      limits: events.filter((e) => e.type === 'ExecutionHandedOff').map((e) => (e.data as { maxAttempts?: number }).maxAttempts),
    };
  }

  it('runs the action\'s own 5 attempts when the submission names no limit', { timeout: 60_000 }, async () => {
    const r = await submitAndWait([]);
    expect(r).toMatchObject({ status: 'Failed', attempt: 5, started: [1, 2, 3, 4, 5] });
    expect(r.limits).toEqual([5, 5, 5, 5, 5]);
  });

  it('runs 2 attempts when the submission asks for 2, and still 5 when it asks for more', { timeout: 90_000 }, async () => {
    expect(await submitAndWait(['--max-attempts', '2'])).toMatchObject({ status: 'Failed', attempt: 2, started: [1, 2] });
    expect(await submitAndWait(['--max-attempts', '9'])).toMatchObject({ status: 'Failed', attempt: 5, started: [1, 2, 3, 4, 5] });
  });
});
