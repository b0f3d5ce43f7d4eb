// 2 executor and 3 worker processes (real child processes), 2,000 mixed executions: every one
// reaches exactly one terminal state, each attempt runs once, streams are contiguous, and after
// a handoff only the owner appends. Uses NATS when reachable (CI requires it), else the
// Postgres work queue.
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { START, type StoredEvent } from '../../src/eventstore/event-store.ts';
import { EXECUTION_STREAM_PREFIX } from '../../schemas/events.ts';
import { batonProcesses } from '../support/baton-processes.ts';
import { useTestStore } from '../support/test-store.ts';

const EXECUTIONS = 2_000;
const TERMINAL = new Set(['ExecutionCompleted', 'ExecutionFailed', 'ExecutionCancelled', 'ExecutionTimedOut', 'ExecutionAbandoned']);

describe('multi-process: 2 executors, 3 workers', () => {
  const natsUrl = inject('natsUrl');
  const transport = natsUrl ? 'nats' : 'postgres';
  const t = useTestStore({ beforeClose: () => killAll() });
  const { children, start, diagnostics, killAll } = batonProcesses(() => ({
    BATON_DATABASE_URL: t.db.url,
    ...(natsUrl ? { BATON_NATS_URL: natsUrl } : {}),
  }));
  const run = randomUUID().slice(0, 8);

  it(`runs ${EXECUTIONS} mixed executions to exactly one terminal state each (${transport})`, async () => {
    for (let i = 1; i <= 2; i++) start(`executor-${i}`, ['executor', '--transport', transport, '--metrics-port', '0']);
    for (let i = 1; i <= 3; i++) start(`worker-${i}`, ['worker', '--id', `mp-${run}-${i}`, '--capacity', '16', '--transport', transport, '--metrics-port', '0']);

    const runtime = createExecutionRuntime(t.store);
    const kinds = ['core.noop', 'core.sleep', 'core.fail'] as const;
    const submitted = new Map<string, (typeof kinds)[number]>();
    for (let i = 0; i < EXECUTIONS; i += 100) {
      await Promise.all(
        Array.from({ length: Math.min(100, EXECUTIONS - i) }, async (_, j) => {
          const kind = kinds[(i + j) % kinds.length]!;
          const input = kind === 'core.sleep' ? { ms: (i + j) % 20 } : kind === 'core.fail' ? { message: 'planned', retryable: (i + j) % 2 === 0 } : null;
          const r = await runtime.submit({ action: kind, input, maxAttempts: 2 });
          submitted.set(r.executionId, kind);
        }),
      );
    }

    // Follow the store until every execution is terminal (bounded).
    // A failure is terminal when it is not retried: not retryable, or the last of maxAttempts (2).
    const terminal = new Map<string, StoredEvent[]>();
    const attemptOf = new Map<string, number>();
    const isTerminal = (id: string, e: StoredEvent) =>
      e.type !== 'ExecutionFailed' ? TERMINAL.has(e.type) : !(e.data as { retryable: boolean }).retryable || (attemptOf.get(id) ?? 1) >= 2;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 150_000);
    for await (const e of t.store.subscribe({ after: START, streamPrefixes: [EXECUTION_STREAM_PREFIX], signal: ac.signal })) {
      const id = e.streamId.slice(EXECUTION_STREAM_PREFIX.length);
      if (e.type === 'ExecutionStarted') attemptOf.set(id, (e.data as { attempt: number }).attempt);
      if (!isTerminal(id, e)) continue;
      terminal.set(id, [...(terminal.get(id) ?? []), e]);
      if (terminal.size === submitted.size) break;
    }
    clearTimeout(timer);
    ac.abort();
    expect(terminal.size, diagnostics()).toBe(EXECUTIONS);

    // Let stragglers (a duplicate terminal event would be a bug) land before checking.
    await new Promise((r) => setTimeout(r, 500));
    let retried = 0;
    for (const [id, kind] of submitted) {
      const events = await t.store.readStream(`${EXECUTION_STREAM_PREFIX}${id}`);
      expect(events.map((e) => e.revision)).toEqual(events.map((_, i) => BigInt(i)));
      expect(events.filter((e) => TERMINAL.has(e.type) && !(e.type === 'ExecutionFailed' && e !== events[events.length - 1]))).toHaveLength(1);
      const last = events[events.length - 1]!;
      expect(TERMINAL.has(last.type)).toBe(true);
      if (kind !== 'core.fail') expect(last.type).toBe('ExecutionCompleted');
      // Each attempt started at most once, and after a handoff only that worker appends until the baton returns.
      const starts = events.filter((e) => e.type === 'ExecutionStarted').map((e) => (e.data as { attempt: number }).attempt);
      expect(new Set(starts).size).toBe(starts.length);
      if (starts.length > 1) retried++;
      let owner = 'executor';
      for (const e of events) {
        if (e.type === 'OwnershipReclaimed') {
          expect(e.metadata.by).toBe('executor');
          owner = 'executor';
          continue;
        }
        expect(e.metadata.by, `${id}@${e.revision} ${e.type}`).toBe(owner);
        if (e.type === 'ExecutionHandedOff') owner = `worker:${(e.data as { workerId: string }).workerId}`;
        if (e.type === 'OwnershipReleased' || (e.type === 'ExecutionFailed' && e !== last)) owner = 'executor';
      }
      await runtime.load(id); // every stream folds through the machine
    }
    expect(retried).toBeGreaterThan(0); // retryable failures were retried on a second attempt

    // SIGTERM: every host drains and exits 0.
    for (const c of children) c.proc.kill('SIGTERM');
    const codes = await Promise.all(children.map((c) => c.exited));
    expect(codes, diagnostics()).toEqual(children.map(() => 0));
  }, 240_000);
});
