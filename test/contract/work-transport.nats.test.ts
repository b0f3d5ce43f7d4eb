import { randomBytes } from 'node:crypto';
import { connect, type NatsConnection } from 'nats';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { loadTestHarnessConfig } from '../../src/config.ts';
import { createNatsWorkTransport, subjectToken } from '../../src/transport/nats.ts';
import type { WorkTransport } from '../../src/transport/work-transport.ts';
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
async function natsHarness(): Promise<WorkTransportHarness & { nc: NatsConnection; streamName: string; subjectPrefix: string }> {
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
    async open(options) {
      const t = await createNatsWorkTransport(nc, { ...options, streamName, subjectPrefix });
      opened.push(t);
      return t;
    },
    async close() {
      for (const t of opened) await t.close();
      const jsm = await nc.jetstreamManager();
      await jsm.streams.delete(streamName).catch(() => undefined);
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
  });
});
