import type { NatsConnection } from 'nats';

/** Delete a test's work stream and its dead-letter stream (`<name>_DLQ`), so runs leave nothing on the server. */
export async function deleteWorkStreams(nc: NatsConnection, streamName: string): Promise<void> {
  const jsm = await nc.jetstreamManager();
  for (const name of [streamName, `${streamName}_DLQ`]) await jsm.streams.delete(name).catch(() => undefined);
}
