// Worker signals (sendSignal / onSignal) in the NATS work transport: core NATS, not JetStream: a
// plain publish on `<prefix>_signal.<workerId>` (a sibling of the work subjects, like the dead
// letters, so no stream stores them), and a plain subscription per onSignal, so every
// subscription of a worker id gets each signal. Nobody listening is not an error. sendSignal
// flushes: it resolves once the server has the message. A signal sent while a subscriber is
// disconnected is lost; the sender rings again.
import { BatonError } from '../../errors.ts';
import { Running } from '../background.ts';
import { decodeSignal, deliverSignal, encodeSignal, validateSignalSubscription, type PortPart } from '../internal.ts';
import type { SignalSubscription, WorkerSignal } from '../work-transport.ts';
import { decoder, encoder, FLUSH_TIMEOUT_MS, flushWithin, type NatsContext } from './context.ts';

export function createSignals({ nc, settings, log, assertOpen }: NatsContext): PortPart<'sendSignal' | 'onSignal'> {
  const running = new Running();

  async function sendSignal(workerId: string, signal: WorkerSignal): Promise<void> {
    assertOpen('sendSignal');
    const payload = encodeSignal(workerId, signal);
    const subject = settings.signalSubject(workerId);
    let timer: NodeJS.Timeout | undefined;
    try {
      nc.publish(subject, encoder.encode(payload));
      // The server answers a flush's PING after it has taken everything before it.
      await Promise.race([
        nc.flush(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`not confirmed by NATS within ${FLUSH_TIMEOUT_MS} ms`)), FLUSH_TIMEOUT_MS);
        }),
      ]);
    } catch (err) {
      throw new BatonError(`sendSignal to worker ${workerId} (${subject}) failed: ${(err as Error).message}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }

  async function onSignal(workerId: string, handler: (signal: WorkerSignal) => void): Promise<SignalSubscription> {
    assertOpen('onSignal');
    validateSignalSubscription(workerId, handler);
    let stopped = false;
    const sub = nc.subscribe(settings.signalSubject(workerId), {
      callback: (err, msg) => {
        if (err) return log?.warn({ err, workerId }, 'worker signal subscription failed');
        if (stopped) return;
        const envelope = decodeSignal(decoder.decode(msg.data), log);
        // The subject names the worker; a body addressed to another is not this worker's.
        if (!envelope || envelope.workerId !== workerId) return;
        deliverSignal(handler, envelope, log);
      },
    });
    const subscription = running.add(async () => {
      stopped = true;
      sub.unsubscribe(); // a no-op once the connection is closed
    });
    // In place at the server once it answers the PING behind our SUB (a bounded wait: on a
    // dead connection the client subscribes again when it reconnects).
    await flushWithin(nc, FLUSH_TIMEOUT_MS);
    return subscription;
  }

  return { port: { sendSignal, onSignal }, stopAll: () => running.stopAll() };
}
