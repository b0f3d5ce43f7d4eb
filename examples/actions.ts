// An actions module: `npx baton dev --actions ./examples/actions.ts`
// (or `npx baton worker --actions ./examples/actions.ts`).
import { z } from 'zod';
import { ActionError, defineAction } from '@baton-run/baton';

export const actions = [
  defineAction({
    name: 'billing.charge',
    input: z.object({ customerId: z.string().min(1), cents: z.number().int().positive() }),
    timeoutMs: 30_000,
    retry: { maxAttempts: 5, initialIntervalMs: 1_000, multiplier: 2, maxIntervalMs: 60_000, nonRetryable: ['CardDeclined'] },
    async run(input, ctx) {
      ctx.log.info({ customerId: input.customerId }, 'charging');
      ctx.heartbeat({ step: 'calling the processor' }); // recorded as ExecutionProgressed
      if (input.customerId === 'declined') throw new ActionError('card declined', { type: 'CardDeclined', retryable: false });
      // Recorded as ExecutionTagged: `baton list --tag charge=ch-…` finds this execution.
      await ctx.tag({ charge: `ch-${input.customerId}-${input.cents}` });
      return { chargedCents: input.cents };
    },
  }),
  defineAction({
    name: 'mail.send',
    input: z.object({ tenant: z.string().min(1), to: z.string().min(1) }),
    rateLimit: { perMinute: 3, key: 'tenant' }, // at most 3 mails a minute per tenant, across every executor
    async run(input) {
      return { sent: input.to };
    },
  }),
];
