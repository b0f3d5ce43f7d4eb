// Consuming from the NATS work transport: each worker id's durable pull consumer, fed to the
// handlers by the shared pull loop (../pull-loop.ts), and the queue depth for metrics.
//
// Pulling: a consumer never asks for more messages than it has free handler slots. It keeps
// `inFlight + requested <= concurrency`, where `requested` is what its open fetches may still
// deliver, and opens another fetch for the free slots when there are at least a quarter of
// `concurrency` of them (or nothing is requested at all), so a busy consumer pulls in batches
// and an idle one holds one long-poll fetch open (PULL_EXPIRES_MS, with server heartbeats).
// Buffering more (consume() with its own refill) would start ack-wait clocks on messages no
// handler has, and starve the other consumers of the same worker.
import type { JsMsg } from 'nats';
import { Running } from '../background.ts';
import { validateConsume, WorkMessageSchema, type ConsumePart } from '../internal.ts';
import { runPullLoop, type PullSource, type Pulled, type Settlement } from '../pull-loop.ts';
import type { ConsumeOptions, Consumer, Delivery, WorkMessage } from '../work-transport.ts';
import { apiErrorCode, decoder, FLUSH_TIMEOUT_MS, flushWithin, JS_CONSUMER_NOT_FOUND, type NatsContext } from './context.ts';
import { fetchInto } from './fetch.ts';
import type { Provisioning } from './provision.ts';
import { throttleWorking, workingEveryMs, type ThrottledWorking } from '../working-throttle.ts';

export function createConsumers(
  ctx: NatsContext,
  provisioning: Provisioning,
  /** Listen for this consumer's max-deliveries advisories until the returned function is called. */
  watchAdvisories: (consumer: string) => () => void,
): ConsumePart {
  const { nc, js, jsm, settings, log } = ctx;
  const running = new Running();

  const settlement = (m: JsMsg): Settlement => {
    // Made on the first working() only; one +WPI per call flooded the connection: throttled (working-throttle.ts).
    let throttled: ThrottledWorking | undefined;
    return {
      // Fire-and-forget, as JetStream acks are: a lost ack means one redelivery, which the
      // event store's fencing makes harmless. stop() and close() flush the connection.
      ack: async () => {
        throttled?.stop();
        m.ack();
      },
      nak: async (delayMs) => {
        throttled?.stop();
        if (delayMs > 0) m.nak(delayMs);
        else m.nak();
      },
      term: async () => {
        throttled?.stop();
        m.term();
      },
      working: () => (throttled ??= throttleWorking(async () => m.working(), workingEveryMs(settings.ackWaitMs))).working(),
    };
  };

  /** The worker's consumer as the pull loop's source. */
  async function jetStreamSource(workerId: string, clog: typeof log): Promise<PullSource> {
    let pull = js.consumers.getPullConsumerFor(await provisioning.ensureConsumer(workerId));
    let recreate = false;

    function decode(m: JsMsg): Pulled | undefined {
      let message: WorkMessage;
      try {
        message = WorkMessageSchema.parse(JSON.parse(decoder.decode(m.data)));
      } catch (err) {
        // Redelivering it cannot help: terminate it, and say so.
        clog?.error(
          { err, subject: m.subject, streamSequence: m.seq, natsMsgId: m.headers?.get('Nats-Msg-Id') },
          'work message is not a valid WorkMessage; terminated',
        );
        m.term();
        return undefined;
      }
      return { message, deliveryCount: m.info.deliveryCount, settlement: settlement(m) };
    }

    return {
      ended: () => nc.isClosed(),
      async pull(max, take, signal) {
        try {
          if (recreate) {
            // The consumer (or the whole stream) disappeared: NATS lost its state, or someone
            // deleted it. Recreate both; what was lost is re-published from the event store.
            pull = js.consumers.getPullConsumerFor(await provisioning.ensureConsumer(workerId));
            recreate = false;
          }
          return await fetchInto(pull, max, signal, (m) => take(decode(m)), 'JetStream fetch ended early without messages; backing off');
        } catch (err) {
          recreate = true;
          return { next: 'back-off', why: 'JetStream fetch failed; retrying', err };
        }
      },
    };
  }

  async function consume(workerId: string, handler: (delivery: Delivery) => Promise<void>, o: ConsumeOptions): Promise<Consumer> {
    ctx.assertOpen('consume');
    validateConsume(workerId, handler, o);
    const clog = log?.child({ workerId });
    const source = await jetStreamSource(workerId, clog);
    // This consumer's pulls are what make JetStream give up on a message: hear it here.
    const unwatch = watchAdvisories(settings.consumerName(workerId));
    const loop = runPullLoop(source, { concurrency: o.concurrency, handler, log: clog, overlapAt: Math.max(1, Math.floor(o.concurrency / 4)) });
    return running.add(async () => {
      await loop.stop();
      await flushWithin(nc, FLUSH_TIMEOUT_MS); // the handlers' acks reach the server
      unwatch();
    });
  }

  async function depth(workerId?: string): Promise<number> {
    if (workerId === undefined) return (await jsm.streams.info(settings.streamName)).state.messages;
    try {
      const ci = await jsm.consumers.info(settings.streamName, settings.consumerName(workerId));
      return ci.num_pending + ci.num_ack_pending;
    } catch (err) {
      if (apiErrorCode(err) !== JS_CONSUMER_NOT_FOUND) throw err;
      // Nobody consumed for this worker yet: everything on its subjects is waiting.
      const si = await jsm.streams.info(settings.streamName, { subjects_filter: settings.filterFor(workerId) });
      return Object.values(si.state.subjects ?? {}).reduce((a, b) => a + b, 0);
    }
  }

  return { port: { consume, depth }, stopAll: () => running.stopAll() };
}
