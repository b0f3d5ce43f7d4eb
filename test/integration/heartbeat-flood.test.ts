// ctx.heartbeat() as actions really call it, end to end with a real executor and worker on the
// Postgres queue: called in a tight loop it extends the delivery's lease a bounded number of
// times (one UPDATE per call starved the worker's pool until it was declared lost), and the run
// completes; progress details are copied at the call, the last report of a throttle window is
// recorded when the window ends, and bad details throw at once, naming the field.
import pg from 'pg';
import { setImmediate as yieldToLoop, setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import { createActionRegistry, defineAction } from '../../src/actions/index.ts';
import type { StoredEvent } from '../../src/eventstore/event-store.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import { executionStreamId } from '../../schemas/events.ts';
import { useOneWorker } from '../support/one-worker.ts';
import { until } from '../support/until.ts';

const ACK_WAIT_MS = 1_000; // so working() may be sent every 100 ms (a tenth of it)

const floods = new Map<string, { calls: number; ms: number }>();
const refusals = new Map<string, Record<string, string>>();
let readStream: (id: string) => Promise<StoredEvent[]>;

const progressOf = (events: StoredEvent[]) => events.filter((e) => e.type === 'ExecutionProgressed').map((e) => (e.data as { details: unknown }).details);

const actions = createActionRegistry([
  defineAction({
    name: 'hb.flood',
    input: z.object({ ms: z.number() }),
    heartbeatTimeoutMs: 5_000,
    async run({ ms }, ctx) {
      const t0 = performance.now();
      let calls = 0;
      // As the QA reproduction: thousands of calls between two yields, for longer than the ack-wait.
      while (performance.now() - t0 < ms) {
        for (let i = 0; i < 1_000; i++) ctx.heartbeat();
        calls += 1_000;
        await yieldToLoop();
      }
      floods.set(ctx.executionId, { calls, ms: performance.now() - t0 });
      return { calls };
    },
  }),
  defineAction({
    name: 'hb.progress',
    input: z.null(),
    async run(_, ctx) {
      const reported = { pct: 10 };
      ctx.heartbeat(reported);
      reported.pct = 99; // after the call: not what was reported
      await sleep(50);
      ctx.heartbeat({ pct: 50 }); // inside the first report's window: recorded when it ends, while this still runs
      await until('pct 50 to be recorded while the action runs', async () => progressOf(await readStream(ctx.executionId)).length === 2, 5_000);
      ctx.heartbeat({ pct: 75 });
      ctx.heartbeat({ pct: 100 }); // the last report, just before the end: recorded before the outcome
      return 'done';
    },
  }),
  defineAction({
    name: 'hb.snapshot',
    input: z.null(),
    run(_, ctx) {
      const reported = { pct: 10 };
      ctx.heartbeat(reported);
      reported.pct = 99; // after the call: not what was reported
      return null;
    },
  }),
  defineAction({
    name: 'hb.bad-details',
    input: z.null(),
    run(_, ctx) {
      const cyclic: Record<string, unknown> = {};
      cyclic.self = cyclic;
      const bad: Record<string, unknown> = {
        bigint: { n: 10n },
        cycle: cyclic,
        huge: { text: 'x'.repeat(5 * 1024 * 1024) },
        nul: { text: 'a\u0000b' },
        fn: { f: () => 1 },
        getter: {
          get g() {
            throw new Error('getter boom');
          },
        },
        nan: { pct: NaN },
      };
      const seen: Record<string, string> = {};
      for (const [kind, details] of Object.entries(bad)) {
        try {
          ctx.heartbeat(details);
          seen[kind] = 'accepted';
        } catch (err) {
          seen[kind] = `${(err as Error).name}: ${(err as Error).message}`;
        }
      }
      refusals.set(ctx.executionId, seen);
      return null;
    },
  }),
]);

describe('ctx.heartbeat', () => {
  /** working() UPDATEs the transport sent, counted on its own (real) pool. */
  let workingUpdates = 0;
  let transportPool: pg.Pool | undefined;
  const hosts = useOneWorker({
    workerId: 'beater',
    actions,
    max: 10,
    transport: (t) => {
      transportPool = new pg.Pool({ connectionString: t.db.url, max: 4 });
      const query = transportPool.query.bind(transportPool) as (...a: unknown[]) => unknown;
      (transportPool as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
        if ((a[0] as { name?: string } | undefined)?.name === 'baton_work_working') workingUpdates++;
        return query(...a);
      };
      return createPostgresWorkTransport(transportPool, { ackWaitMs: ACK_WAIT_MS });
    },
    afterStop: async () => void (await transportPool?.end()),
  });
  beforeAll(() => {
    readStream = (id) => hosts.t.store.readStream(executionStreamId(id));
  });

  it('a flood of heartbeats extends the lease a bounded number of times, and the run completes normally', { timeout: 30_000 }, async () => {
    workingUpdates = 0;
    const { executionId } = await hosts.runtime.submit({ action: 'hb.flood', input: { ms: ACK_WAIT_MS * 1.5 } });
    const events = await hosts.finished(executionId);
    expect(events.map((e) => e.type)).toEqual(['ExecutionRequested', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted']);
    const { calls, ms } = floods.get(executionId)!;
    console.log(`[heartbeat flood] ${calls} ctx.heartbeat() calls in ${ms.toFixed(0)} ms made ${workingUpdates} working() UPDATEs (ack-wait ${ACK_WAIT_MS} ms)`);
    expect(calls).toBeGreaterThan(10_000);
    // At most one per tenth of the ack-wait (and the first at once): far fewer than the calls,
    // yet enough that the lease never ran out (it was never redelivered: one start above).
    expect(workingUpdates).toBeLessThanOrEqual(Math.ceil(ms / (ACK_WAIT_MS / 10)) + 2);
    expect(workingUpdates).toBeGreaterThanOrEqual(2);
    await until('the worker to free the slot', () => hosts.worker.inFlight() === 0);
  });

  it('records the details as they were at the call, the last of a window when it ends, and the last report before the outcome', { timeout: 15_000 }, async () => {
    const { executionId } = await hosts.runtime.submit({ action: 'hb.progress', input: null });
    const events = await hosts.finished(executionId);
    expect(events.map((e) => e.type)).toEqual([
      'ExecutionRequested',
      'ExecutionHandedOff',
      'ExecutionStarted',
      'ExecutionProgressed',
      'ExecutionProgressed',
      'ExecutionProgressed',
      'ExecutionCompleted',
    ]);
    // pct 75 was replaced by pct 100 inside one window; pct 99 was never reported.
    expect(progressOf(events)).toEqual([{ pct: 10 }, { pct: 50 }, { pct: 100 }]);
  });

  it('records the details as they were when reported, not as changed afterwards', async () => {
    const { executionId } = await hosts.runtime.submit({ action: 'hb.snapshot', input: null });
    expect(progressOf(await hosts.finished(executionId))).toEqual([{ pct: 10 }]);
  });

  it('refuses bad details at once, naming the field, as ctx.tag does', async () => {
    const { executionId } = await hosts.runtime.submit({ action: 'hb.bad-details', input: null });
    const events = await hosts.finished(executionId);
    expect(events.at(-1)!.type).toBe('ExecutionCompleted');
    expect(progressOf(events)).toEqual([]);
    expect(refusals.get(executionId)).toEqual({
      bigint: 'InvalidInputError: details.n: a bigint is not JSON',
      cycle: 'InvalidInputError: details.self: is the whole value again (a cycle), which JSON cannot hold',
      huge: `InvalidInputError: details: larger than ${4 * 1024 * 1024} bytes as JSON`,
      nul: expect.stringMatching(/^InvalidInputError: details\.text: must not contain a NUL character/),
      fn: 'InvalidInputError: details.f: a function is not JSON',
      getter: 'InvalidInputError: details.g: could not be read: its getter threw: getter boom',
      nan: 'InvalidInputError: details.pct: NaN is not a JSON number',
    });
  });
});
