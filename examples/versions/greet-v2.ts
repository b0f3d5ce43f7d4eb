// Version 2 of examples.greet, deployed beside version 1 (README: Versioned actions).
import { z } from 'zod';
import { defineAction } from '@baton-run/baton';

export const actions = [
  defineAction({
    name: 'examples.greet',
    version: 2,
    input: z.object({ name: z.string() }),
    retry: { maxAttempts: 3, initialIntervalMs: 100, multiplier: 1, maxIntervalMs: 100 },
    run: ({ name }) => ({ greeting: `Good day, ${name}`, version: 2 }),
  }),
];
