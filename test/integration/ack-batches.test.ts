// The Postgres queue's acks are DELETEs batched while one is in flight (DeleteBatcher). One that
// arrived after the batch loop's last look for more and before it let go of its in-flight mark
// was left to a loop that had ended: its ack waited for the next one, at light load for good
// (the message then came back after its ack-wait and ran again).
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { DeleteBatcher } from '../../src/transport/postgres/consume.ts';
import { useTestDatabase } from '../support/test-db.ts';

const db = useTestDatabase();

it('an ack that arrives while the batch before it is ending is deleted too, at any microtask across that end', async () => {
  const batcher = new DeleteBatcher(db().pool);
  for (let offset = 0; offset < 12; offset++) {
    const second = batcher.delete(randomUUID(), 1).then(async () => {
      for (let i = 0; i < offset; i++) await null;
      return batcher.delete(randomUUID(), 1);
    });
    const done = await Promise.race([second.then(() => 'acked'), new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 2_000).unref())]);
    expect(done, `the second ack ${offset} microtasks after the first was deleted`).toBe('acked');
  }
  await batcher.idle();
});
