// The NATS work transport's dead-letter stream, read back: onDeadLetter subscribers (one shared
// durable consumer, acked once the handler resolved, handed over again after a back-off when it
// failed), and the list / get / retry / delete of `baton dlq` and the API. How messages get
// there: ./dead-letters.ts.
import type { JsMsg } from 'nats';
import { NotFoundError } from '../../errors.ts';
import { Running } from '../background.ts';
import { deadLetterRetryDelayMs, validateDeadLetterHandler, validateListDeadLetters, validateMessageId, type DeadLetterPart } from '../internal.ts';
import { repeatPulls, type PullEnd } from '../pull-loop.ts';
import type { DeadLetter, DeadLetterSubscription, ListDeadLettersOptions } from '../work-transport.ts';
import { deleteStored, encoder, FLUSH_TIMEOUT_MS, flushWithin, jsonOrUndefined, nextMessage, storedMessage, type NatsContext } from './context.ts';
import { StoredDeadLetterSchema, type DeadLetterMover } from './dead-letters.ts';
import { fetchInto } from './fetch.ts';
import type { Provisioning } from './provision.ts';
import type { Publisher } from './publish.ts';

const DEAD_LETTER_BATCH = 8;

export function createDeadLetterQueue(ctx: NatsContext, provisioning: Provisioning, publisher: Publisher, mover: DeadLetterMover): DeadLetterPart {
  const { nc, js, jsm, settings, log } = ctx;
  const { deadLetterStream } = settings;
  const running = new Running();

  /** A dead-letter stream message (stored or delivered) as the port's DeadLetter; undefined (logged) when it is not one. */
  function decodeDeadLetter(m: { seq: number; subject: string; data: Uint8Array }): DeadLetter | undefined {
    const r = StoredDeadLetterSchema.safeParse(jsonOrUndefined(m.data));
    if (!r.success) {
      log?.error({ stream: deadLetterStream, streamSequence: m.seq, subject: m.subject }, 'message in the dead-letter stream is not a dead letter; skipped');
      return undefined;
    }
    return { ...r.data, cursor: String(m.seq) };
  }

  async function onDeadLetter(handler: (deadLetter: DeadLetter) => Promise<void>): Promise<DeadLetterSubscription> {
    ctx.assertOpen('onDeadLetter');
    validateDeadLetterHandler(handler);
    const dlog = log?.child({ subscription: 'dead-letters' });
    let pull = js.consumers.getPullConsumerFor(await provisioning.ensureDeadLetterConsumer());
    let recreate = false;
    const unwatch = mover.watchAdvisories('*');
    const sweeping = mover.startSweeping();
    const stopping = new AbortController();

    async function handle(m: JsMsg): Promise<void> {
      const deadLetter = decodeDeadLetter(m);
      if (!deadLetter) return m.term();
      const about = { messageId: deadLetter.messageId, executionId: deadLetter.message.executionId, workerId: deadLetter.workerId };
      try {
        await handler(deadLetter);
      } catch (err) {
        const retryInMs = deadLetterRetryDelayMs(m.info.deliveryCount);
        dlog?.warn({ err, ...about, retryInMs }, 'dead-letter handler failed; handing the dead letter over again later');
        return m.nak(retryInMs);
      }
      m.ack();
    }

    async function pullOnce(signal: AbortSignal): Promise<PullEnd> {
      try {
        if (recreate) {
          pull = js.consumers.getPullConsumerFor(await provisioning.ensureDeadLetterConsumer());
          recreate = false;
        }
        return await fetchInto(pull, DEAD_LETTER_BATCH, signal, handle, 'dead-letter fetch ended early without messages; backing off');
      } catch (err) {
        recreate = true;
        return { next: 'back-off', why: 'dead-letter fetch failed; retrying', err };
      }
    }

    const loop = repeatPulls(pullOnce, { signal: stopping.signal, log: dlog });
    return running.add(async () => {
      stopping.abort();
      await sweeping.stop();
      await loop;
      unwatch();
      await flushWithin(nc, FLUSH_TIMEOUT_MS); // the acks reach the server
    });
  }

  async function listDeadLetters(o: ListDeadLettersOptions): Promise<DeadLetter[]> {
    const { limit, after } = validateListDeadLetters(o);
    const found: DeadLetter[] = [];
    // One request per dead letter, each for the next one after the last; a page is at most 1,000.
    for (let seq = Number(after) + 1; found.length < limit; ) {
      const sm = await nextMessage(jsm, deadLetterStream, seq, `${settings.deadLetterPrefix}.*`);
      if (!sm) break;
      const deadLetter = decodeDeadLetter(sm);
      if (deadLetter) found.push(deadLetter);
      seq = sm.seq + 1;
    }
    return found;
  }

  async function storedDeadLetter(messageId: string): Promise<{ seq: number; deadLetter: DeadLetter } | undefined> {
    const sm = await storedMessage(jsm, deadLetterStream, { last_by_subj: settings.deadLetterSubject(messageId) });
    const deadLetter = sm && decodeDeadLetter(sm);
    return deadLetter && { seq: sm.seq, deadLetter };
  }

  async function getDeadLetter(messageId: string): Promise<DeadLetter | undefined> {
    return (await storedDeadLetter(validateMessageId('getDeadLetter', messageId)))?.deadLetter;
  }

  async function retryDeadLetter(messageId: string): Promise<DeadLetter> {
    ctx.assertOpen('retryDeadLetter');
    const id = validateMessageId('retryDeadLetter', messageId);
    const found = await storedDeadLetter(id);
    if (!found) throw new NotFoundError('dead letter', id);
    const { message } = found.deadLetter;
    // Its own dedupe id: the original's may still be in the work stream's duplicate window, and a
    // retry that died before the delete below, retried, publishes once.
    await publisher.publishRestoring('work', settings.subjectFor(message), encoder.encode(JSON.stringify(message)), `${message.messageId}:retry:${found.seq}`);
    await deleteStored(jsm, deadLetterStream, found.seq);
    log?.info({ messageId: id, executionId: message.executionId, workerId: message.workerId }, 'dead letter published again');
    return found.deadLetter;
  }

  async function deleteDeadLetter(messageId: string): Promise<DeadLetter> {
    const id = validateMessageId('deleteDeadLetter', messageId);
    const found = await storedDeadLetter(id);
    if (!found) throw new NotFoundError('dead letter', id);
    await deleteStored(jsm, deadLetterStream, found.seq);
    log?.info({ messageId: id, executionId: found.deadLetter.message.executionId }, 'dead letter deleted');
    return found.deadLetter;
  }

  return { port: { onDeadLetter, listDeadLetters, getDeadLetter, retryDeadLetter, deleteDeadLetter }, stopAll: () => running.stopAll() };
}
