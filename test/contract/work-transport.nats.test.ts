import { randomBytes } from 'node:crypto';
import { AckPolicy, connect, nanos, type NatsConnection } from 'nats';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { loadTestHarnessConfig } from '../../src/config-test-harness.ts';
import { createNatsWorkTransport, deleteNatsWorkStreams, subjectToken, type NatsWorkTransportOptions } from '../../src/transport/nats/index.ts';
import type { DeadLetter, WorkTransport } from '../../src/transport/work-transport.ts';
import { workMessage, workTransportContract, type WorkTransportHarness } from './work-transport.contract.ts';

const natsUrl = inject('natsUrl');
if (!natsUrl) {
  console.warn(
    `NATS suites skipped: NATS not reachable at ${loadTestHarnessConfig().natsUrl} ` +
      '(set BATON_NATS_URL or start nats-server -js; CI requires it via BATON_REQUIRE_NATS=1)',
  );
}

/** One stream and subject prefix per harness, deleted afterwards; every connection closed. */
const connections: NatsConnection[] = [];
async function natsHarness(): Promise<WorkTransportHarness & { nc: NatsConnection; streamName: string; subjectPrefix: string; open(options: NatsWorkTransportOptions): Promise<WorkTransport> }> {
  const id = randomBytes(4).toString('hex');
  const streamName = `BATON_TEST_${id}`;
  const subjectPrefix = `batontest.${id}`;
  const nc = await connect({ servers: natsUrl!, name: `baton-test-${id}` });
  connections.push(nc);
  const opened: WorkTransport[] = [];
  return {
    nc,
    streamName,
    subjectPrefix,
    async open(options: NatsWorkTransportOptions) {
      const t = await createNatsWorkTransport(nc, { ...options, streamName, subjectPrefix });
      opened.push(t);
      return t;
    },
    async sendRawSignal(workerId, payload) {
      nc.publish(`${subjectPrefix}_signal.${subjectToken(workerId)}`, new TextEncoder().encode(payload));
      await nc.flush();
    },
    async close() {
      for (const t of opened) await t.close();
      await deleteNatsWorkStreams(nc, { streamName });
      await nc.close();
    },
  };
}

describe.skipIf(!natsUrl)('nats', () => {
  afterAll(() => {
    // A connection left open keeps the worker alive and hides leaks: fail on it.
    const open = connections.filter((nc) => !nc.isClosed());
    for (const nc of open) void nc.close();
    expect(open.length, 'NATS connections left open').toBe(0);
  });

  workTransportContract('nats', natsHarness);

  describe('nats work transport specifics', () => {
    it('sends working() (+WPI) at most once per tenth of the ack-wait, however often a handler calls it', async () => {
      const h = await natsHarness();
      try {
        const ackWaitMs = 1_000;
        const transport = await h.open({ ackWaitMs, maxDeliver: 3 });
        const worker = 'w-flood';
        let signals = 0;
        // The acks this connection sends, as the server receives them.
        const sub = h.nc.subscribe(`$JS.ACK.${h.streamName}.>`, { callback: (_e, m) => void (new TextDecoder().decode(m.data) === '+WPI' && signals++) });
        await h.nc.flush();
        await transport.publish([workMessage(worker)]);
        let deliveries = 0;
        let flood: { calls: number; ms: number } | undefined;
        const consumer = await transport.consume(worker, async (d) => {
          deliveries++;
          const t0 = performance.now();
          let calls = 0;
          while (performance.now() - t0 < ackWaitMs * 1.5) {
            for (let i = 0; i < 1_000; i++) void d.working();
            calls += 1_000;
            await new Promise((r) => setImmediate(r));
          }
          flood = { calls, ms: performance.now() - t0 };
          await d.ack();
        }, { concurrency: 1 });
        const deadline = performance.now() + 10_000;
        while (!flood && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        await consumer.stop();
        await h.nc.flush();
        sub.unsubscribe();
        expect(flood, 'the handler never finished').toBeDefined();
        expect(flood!.calls).toBeGreaterThan(10_000);
        expect(signals).toBeLessThanOrEqual(Math.ceil(flood!.ms / (ackWaitMs / 10)) + 2);
        expect(signals).toBeGreaterThanOrEqual(2); // yet the lease was kept: never redelivered
        expect(deliveries).toBe(1);
      } finally {
        await h.close();
      }
    });

    it('terminates (and logs) a message that is not a WorkMessage, and delivers the next one', async () => {
      const h = await natsHarness();
      try {
        const transport = await h.open({ ackWaitMs: 1_000, maxDeliver: 3 });
        const worker = 'w-garbage';
        const js = h.nc.jetstream();
        await js.publish(`${h.subjectPrefix}.node.${subjectToken(worker)}`, new TextEncoder().encode('{"not":"a work message"'));
        const good = workMessage(worker);
        await transport.publish([good]);
        const seen: string[] = [];
        let done!: () => void;
        const got = new Promise<void>((r) => (done = r));
        const consumer = await transport.consume(worker, async (d) => {
          seen.push(d.message.messageId);
          await d.ack();
          done();
        }, { concurrency: 1 });
        await Promise.race([got, new Promise((_, reject) => setTimeout(() => reject(new Error('good message not delivered in 5 s')), 5_000).unref())]);
        await consumer.stop();
        expect(seen).toEqual([good.messageId]);
        // Terminated: gone from the work queue (no redelivery, nothing pending).
        const jsm = await h.nc.jetstreamManager();
        const deadline = Date.now() + 5_000;
        while ((await jsm.streams.info(h.streamName)).state.messages !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        expect((await jsm.streams.info(h.streamName)).state.messages).toBe(0);
      } finally {
        await h.close();
      }
    });

    it('recreates its stream and consumer when NATS lost them, and delivers again', async () => {
      const h = await natsHarness();
      try {
        const transport = await h.open({ ackWaitMs: 1_000 });
        const worker = 'w-lost';
        const seen: string[] = [];
        let notify = () => {};
        const consumer = await transport.consume(worker, async (d) => {
          seen.push(d.message.messageId);
          await d.ack();
          notify();
        }, { concurrency: 2 });
        const deliveredWithin = (id: string, ms: number) =>
          new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`${id} not delivered within ${ms} ms`)), ms);
            notify = () => {
              if (seen.includes(id)) {
                clearTimeout(timer);
                resolve();
              }
            };
            notify();
          });
        const before = workMessage(worker);
        await transport.publish([before]);
        await deliveredWithin(before.messageId, 5_000);
        const jsm = await h.nc.jetstreamManager();
        await jsm.streams.delete(h.streamName); // the server's store is gone
        const after = workMessage(worker);
        await transport.publish([after]); // recreates the stream
        await deliveredWithin(after.messageId, 10_000); // the consumer notices and recreates itself
        await consumer.stop();
        expect(seen).toEqual([before.messageId, after.messageId]);
      } finally {
        await h.close();
      }
    });

    it('sweeps up a message that ran out of deliveries while nobody heard its advisory, once however many subscribers sweep', async () => {
      const h = await natsHarness();
      try {
        const [a, b] = [await h.open({ ackWaitMs: 1_000, maxDeliver: 2 }), await h.open({ ackWaitMs: 1_000, maxDeliver: 2 })];
        const worker = 'w-unheard';
        const m = workMessage(worker);
        await a.publish([m]);
        // Exhaust it through a bare JetStream consumer of that worker: no Baton consumer or
        // subscriber is running, so the max-deliveries advisory goes out to nobody.
        const jsm = await h.nc.jetstreamManager();
        await jsm.consumers.add(h.streamName, {
          durable_name: `worker-${worker}`,
          filter_subject: `${h.subjectPrefix}.*.${worker}`,
          ack_policy: AckPolicy.Explicit,
          ack_wait: nanos(1_000),
          max_deliver: 2,
        });
        const bare = await h.nc.jetstream().consumers.get(h.streamName, `worker-${worker}`);
        for (let i = 1; i <= 2; i++) {
          const msg = await bare.next({ expires: 2_000 });
          expect(msg?.info.deliveryCount).toBe(i);
          msg!.nak();
        }
        expect(await bare.next({ expires: 1_000 })).toBeNull(); // given up on: not delivered a third time
        expect((await jsm.consumers.info(h.streamName, `worker-${worker}`)).num_ack_pending).toBe(0);
        expect(await a.getDeadLetter(m.messageId)).toBeUndefined();

        // Two subscribers (two processes) start at once; each sweeps.
        const handed: DeadLetter[] = [];
        const record = async (d: DeadLetter) => {
          handed.push(d);
        };
        const subs = await Promise.all([a.onDeadLetter(record), b.onDeadLetter(record)]);
        try {
          const deadline = Date.now() + 5_000;
          while (!handed.some((d) => d.messageId === m.messageId) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
          expect(handed.find((d) => d.messageId === m.messageId)).toMatchObject({ message: m, deliveries: 2, reason: 'not acknowledged after 2 deliveries' });
          expect((await jsm.streams.info(h.streamName)).state.messages).toBe(0); // out of the work stream
          expect((await a.listDeadLetters({ limit: 10 })).map((d) => d.messageId)).toEqual([m.messageId]);
          expect((await jsm.streams.info(`${h.streamName}_DLQ`)).state.messages).toBe(1);
        } finally {
          await Promise.all(subs.map((s) => s.stop()));
        }
      } finally {
        await h.close();
      }
    });

    it('a worker\'s consumer outlives idle pulls, is deleted once nobody pulls past its inactive threshold, and comes back with what waited', { timeout: 30_000 }, async () => {
      const h = await natsHarness();
      try {
        const transport = await h.open({ ackWaitMs: 1_000, consumerInactiveThresholdMs: 1_000 });
        const jsm = await h.nc.jetstreamManager();
        const worker = 'w-inactive';
        const exists = () =>
          jsm.consumers.info(h.streamName, `worker-${worker}`).then(
            () => true,
            () => false,
          );
        const seen: string[] = [];
        const handler = async (d: Parameters<Parameters<WorkTransport['consume']>[1]>[0]) => {
          seen.push(d.message.messageId);
          await d.ack();
        };
        const first = await transport.consume(worker, handler, { concurrency: 1 });
        // Idle, but holding a pull request open: a live worker is never inactive.
        await new Promise((r) => setTimeout(r, 3_500));
        expect(await exists(), 'consumer of a live, idle worker').toBe(true);
        await first.stop();
        const deadline = Date.now() + 10_000;
        while ((await exists()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        expect(await exists(), 'consumer deleted after the inactive threshold').toBe(false);

        const waiting = workMessage(worker);
        await transport.publish([waiting]); // nobody consumes this worker's subjects now
        const again = await transport.consume(worker, handler, { concurrency: 1 });
        const until = Date.now() + 5_000;
        while (!seen.includes(waiting.messageId) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        await again.stop();
        expect(seen).toEqual([waiting.messageId]);
        expect((await jsm.consumers.info(h.streamName, `worker-${worker}`)).config.inactive_threshold).toBe(nanos(1_000));
      } finally {
        await h.close();
      }
    });

    it('purges what a gone worker left unacked once its consumer expired, and keeps what is younger or still has a consumer', { timeout: 30_000 }, async () => {
      const h = await natsHarness();
      try {
        const thresholdMs = 3_000;
        const transport = await h.open({ ackWaitMs: 1_000, maxDeliver: 3, consumerInactiveThresholdMs: thresholdMs });
        const jsm = await h.nc.jetstreamManager();
        const subjectOf = (workerId: string) => `${h.subjectPrefix}.node.${subjectToken(workerId)}`;
        const waiting = async () => (await jsm.streams.info(h.streamName, { subjects_filter: `${h.subjectPrefix}.*.*` })).state.subjects ?? {};
        // Two workers each take a message and die holding it (bare JetStream consumers, never acked):
        // one whose consumer expires, one whose consumer is still there (a worker away for less than the threshold).
        const [gone, away, fresh] = ['w-gone', 'w-away', 'w-fresh'];
        const [left, held] = [workMessage(gone), workMessage(away)];
        await transport.publish([left, held]);
        for (const [worker, inactiveMs] of [[gone, thresholdMs], [away, 600_000]] as const) {
          await jsm.consumers.add(h.streamName, {
            durable_name: `worker-${worker}`,
            filter_subject: `${h.subjectPrefix}.*.${worker}`,
            ack_policy: AckPolicy.Explicit,
            ack_wait: nanos(60_000),
            inactive_threshold: nanos(inactiveMs),
          });
          const taken = await (await h.nc.jetstream().consumers.get(h.streamName, `worker-${worker}`)).next({ expires: 2_000 });
          expect(taken?.info.deliveryCount).toBe(1); // and never acked
        }
        const consumerGone = async () =>
          jsm.consumers.info(h.streamName, `worker-${gone}`).then(
            () => false,
            () => true,
          );
        const deadline = Date.now() + 15_000;
        while (!(await consumerGone()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
        expect(await consumerGone(), 'the gone worker\'s consumer deleted by its inactive threshold').toBe(true);
        expect(Object.keys(await waiting()).sort()).toEqual([subjectOf(away), subjectOf(gone)]); // left there: nobody will ever ack it

        const young = workMessage(fresh); // for a worker not consuming yet: younger than the threshold
        await transport.publish([young]);
        const handed: string[] = [];
        const subscription = await transport.onDeadLetter(async (d) => {
          handed.push(d.messageId);
        }); // sweeps at once
        try {
          const until = Date.now() + 5_000;
          while (subjectOf(gone) in (await waiting()) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
          expect(Object.keys(await waiting()).sort()).toEqual([subjectOf(away), subjectOf(fresh)]);
          expect(await transport.getDeadLetter(left.messageId)).toBeUndefined(); // purged, not a dead letter
          expect(handed).toEqual([]);
        } finally {
          await subscription.stop();
        }
      } finally {
        await h.close();
      }
    });

    it('keeps ids with dots, wildcards and spaces apart on the wire', async () => {
      expect(subjectToken('host.a')).toBe('host~2Ea');
      expect(subjectToken('a*>b c%')).toBe('a~2A~3Eb~20c~25');
      expect(subjectToken('~é')).toBe('~7E~C3~A9');
      expect(subjectToken('w-1_ok')).toBe('w-1_ok');
      const h = await natsHarness();
      try {
        const transport = await h.open({ ackWaitMs: 1_000 });
        const [dotted, plain] = ['worker.1', 'worker~2E1']; // the second is what the first encodes to
        const got: string[] = [];
        let done!: () => void;
        const both = new Promise<void>((r) => (done = r));
        const handler = (by: string) => async (d: Parameters<Parameters<WorkTransport['consume']>[1]>[0]) => {
          got.push(`${by}:${d.message.workerId}`);
          await d.ack();
          if (got.length === 2) done();
        };
        const c1 = await transport.consume(dotted, handler(dotted), { concurrency: 1 });
        const c2 = await transport.consume(plain, handler(plain), { concurrency: 1 });
        await transport.publish([workMessage(dotted, { runtime: 'node.js' }), workMessage(plain)]);
        await Promise.race([both, new Promise((_, reject) => setTimeout(() => reject(new Error('not delivered in 5 s')), 5_000).unref())]);
        await Promise.all([c1.stop(), c2.stop()]);
        expect(got.sort()).toEqual([`${dotted}:${dotted}`, `${plain}:${plain}`].sort());
      } finally {
        await h.close();
      }
    });
    it('provisions one stream for many transports opened at once, and names the stream that holds its subjects', async () => {
      const h = await natsHarness();
      try {
        // Racing creates of the same stream all end with the one stream (each round a fresh stream).
        const jsm = await h.nc.jetstreamManager();
        for (let round = 0; round < 3; round++) {
          await jsm.streams.delete(h.streamName).catch(() => undefined);
          await Promise.all(Array.from({ length: 6 }, () => h.open({ ackWaitMs: 1_000 })));
          expect((await jsm.streams.info(h.streamName)).config.subjects).toEqual([`${h.subjectPrefix}.>`]);
        }
        // Another stream holding the subjects is not ours to update: a clear error naming both.
        const squatter = `${h.streamName}_OTHER`;
        await jsm.streams.delete(h.streamName);
        await jsm.streams.add({ name: squatter, subjects: [`${h.subjectPrefix}.>`] });
        try {
          await expect(h.open({ ackWaitMs: 1_000 })).rejects.toThrow(new RegExp(`cannot create JetStream stream ${h.streamName} \\(subjects ${h.subjectPrefix.replace('.', '\\.')}\\.>\\): .*overlap`));
        } finally {
          await jsm.streams.delete(squatter);
        }
      } finally {
        await h.close();
      }
    });
  });
});
