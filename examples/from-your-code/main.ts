// Baton from your own code: define an action, run a worker in this process, submit through the
// typed client and await the typed result. In a project with @baton-run/baton and zod installed:
// `npx tsc && DATABASE_URL=postgres://… node out/main.js` (test/integration/package.test.ts runs it so).
import { z } from 'zod';
import { createClient, defineAction } from '@baton-run/baton';
import { startWorker } from '@baton-run/baton/worker';

export const charge = defineAction({
  name: 'billing.charge',
  input: z.object({ customerId: z.string().min(1), cents: z.number().int().positive() }),
  async run({ customerId, cents }) {
    return { customerId, chargedCents: cents };
  },
});

const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
// A worker, and here the executor too, in this process. It drains when you stop it.
const worker = await startWorker({ databaseUrl, actions: [charge], executor: true });
process.once('SIGTERM', () => void worker.stop('SIGTERM'));

const baton = await createClient({ databaseUrl });
try {
  const { executionId } = await baton.submit(charge, { customerId: 'c-42', cents: 500 }, { idempotencyKey: 'order-1001' });
  const { chargedCents } = await baton.result(executionId, { timeout: 30_000 }); // typed from the action
  console.log(`charged ${chargedCents} cents in execution ${executionId}`);
  // @ts-expect-error: the input is checked against the action's schema when you compile, too
  await baton.submit(charge, { customerId: 'c-42', cents: '500' }).catch((err: Error) => console.log(`refused: ${err.message}`));
} finally {
  await baton.close();
  await worker.stop();
}
