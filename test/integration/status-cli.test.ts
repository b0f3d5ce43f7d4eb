// `baton status` of an execution that failed an attempt and then completed: the failure stays in
// its context (as GraphQL's Execution.error), shown as the last failure beside the result, not as
// the execution's error.
import { describe, expect, it } from 'vitest';
import { createPostgresEventStore } from '../../src/eventstore/postgres.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { handOff } from '../api/api-harness.ts';
import { runBaton } from '../support/cli.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();

describe('baton status', () => {
  it('labels an earlier attempt’s failure as the last failure, and a failed execution’s as its error', async () => {
    const runtime = createExecutionRuntime(createPostgresEventStore(db().pool));
    const retried = (await runtime.submit({ action: 'core.noop', maxAttempts: 2 })).executionId;
    await handOff(runtime, retried, 'w1');
    await runtime.dispatch(retried, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    await runtime.dispatch(retried, { type: 'ExecutionFailed', data: { error: { message: 'flake 1' }, retryable: true }, by: 'worker:w1' });
    await runtime.dispatch(retried, { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: new Date().toISOString(), reason: 'flake 1' }, by: 'executor' });
    await runtime.dispatch(retried, { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 2, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'executor' });
    await runtime.dispatch(retried, { type: 'ExecutionStarted', data: { attempt: 2 }, by: 'worker:w1' });
    await runtime.dispatch(retried, { type: 'ExecutionCompleted', data: { result: { ok: 2 } }, by: 'worker:w1' });
    const completed = await runBaton(['status', retried], { databaseUrl: db().url });
    expect(completed.code, completed.stderr).toBe(0);
    expect(completed.stdout).toMatch(/^status +Completed$/m);
    expect(completed.stdout).toMatch(/^last failure +flake 1$/m);
    expect(completed.stdout).not.toMatch(/^error /m);
    // Its events say why each happened, in the table itself.
    const events = await runBaton(['events', retried], { databaseUrl: db().url });
    const lines = events.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^REV +TYPE +BY +STATE AFTER +RECORDED AT +WHY$/);
    expect(lines.find((l) => l.includes('ExecutionHandedOff'))).toMatch(/ to w1, attempt 1$/);
    expect(lines.find((l) => l.includes('ExecutionFailed'))).toMatch(/ flake 1$/);
    expect(lines.find((l) => l.includes('ExecutionRetryScheduled'))).toMatch(/ attempt 2 not before \S+: flake 1$/);
    const inspect = await runBaton(['inspect', retried, '--at', '4'], { databaseUrl: db().url });
    expect(inspect.stdout).toMatch(/^why +flake 1$/m);

    // A deadline is named by the limit it is: the handoff's start by, the run's finish by.
    const waiting = (await runtime.submit({ action: 'core.noop' })).executionId;
    await handOff(runtime, waiting, 'w1');
    expect((await runBaton(['status', waiting], { databaseUrl: db().url })).stdout).toMatch(/^start by +\S+Z$/m);
    await runtime.dispatch(waiting, { type: 'ExecutionStarted', data: { attempt: 1, deadline: new Date(Date.now() + 60_000).toISOString() }, by: 'worker:w1' });
    expect((await runBaton(['status', waiting], { databaseUrl: db().url })).stdout).toMatch(/^finish by +\S+Z$/m);

    const failed = (await runtime.submit({ action: 'core.noop', maxAttempts: 1 })).executionId;
    await handOff(runtime, failed, 'w1');
    await runtime.dispatch(failed, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    await runtime.dispatch(failed, { type: 'ExecutionFailed', data: { error: { message: 'boom' }, retryable: false }, by: 'worker:w1' });
    const r = await runBaton(['status', failed], { databaseUrl: db().url });
    expect(r.stdout).toMatch(/^error +boom$/m);
  }, 60_000);
});
