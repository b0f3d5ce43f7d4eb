// Publishing to the NATS work transport's streams.
//
// Publishing is idempotent: `Nats-Msg-Id` = messageId, deduplicated by the stream within its
// duplicate window (default 2 min). Publishes are pipelined, PUBLISH_WINDOW in flight; measured
// here (2 cores, nats-server 2.9): sequential publish-with-ack 4,035 msgs/s, 256 in flight 22,671.
import { ErrorCode, NatsError } from 'nats';
import { WorkPublishError } from '../publish-error.ts';
import { validateForPublish } from '../internal.ts';
import type { WorkMessage } from '../work-transport.ts';
import { encoder, type NatsContext } from './context.ts';
import type { Provisioning } from './provision.ts';
import { mapLimit } from '../../async/map-limit.ts';

const PUBLISH_WINDOW = 256;

export interface Publisher {
  /** The port's publish. */
  publish(messages: WorkMessage[]): Promise<void>;
  /**
   * js.publish to the work or the dead-letter stream, expecting that stream. No responders means
   * no stream takes the subject any more (NATS lost its state, or the stream was deleted):
   * recreate it once and retry; the dedupe id keeps this idempotent.
   */
  publishRestoring(to: 'work' | 'dead letters', subject: string, data: Uint8Array, msgID: string): Promise<void>;
}

export function createPublisher({ js, settings, log, assertOpen }: NatsContext, provisioning: Provisioning): Publisher {
  const { streamName } = settings;

  async function publishRestoring(to: 'work' | 'dead letters', subject: string, data: Uint8Array, msgID: string): Promise<void> {
    const [stream, restore] = to === 'work' ? [streamName, provisioning.restoreStream] : [settings.deadLetterStream, provisioning.restoreDeadLetterStream];
    const send = () => js.publish(subject, data, { msgID, expect: { streamName: stream } });
    try {
      await send();
    } catch (err) {
      if (!(err instanceof NatsError && err.code === ErrorCode.NoResponders)) throw err;
      log?.warn({ err, missingStream: stream }, 'stream missing on publish; recreating it');
      await restore();
      await send();
    }
  }

  async function publish(messages: WorkMessage[]): Promise<void> {
    assertOpen('publish');
    validateForPublish(messages);
    await mapLimit(messages, PUBLISH_WINDOW, async (m) => {
      const subject = settings.subjectFor(m);
      const data = encoder.encode(JSON.stringify(m));
      try {
        await publishRestoring('work', subject, data, m.messageId);
      } catch (err) {
        throw new WorkPublishError(m, `${subject} (stream ${streamName})`, err);
      }
    });
  }

  return { publish, publishRestoring };
}
