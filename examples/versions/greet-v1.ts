// Version 1 of examples.greet: declares no version, so it is version 1 (README: Versioned actions).
import { z } from 'zod';
import { defineAction } from '@baton-run/baton';

export const actions = [
  defineAction({
    name: 'examples.greet',
    input: z.object({ name: z.string() }),
    retry: { maxAttempts: 3, initialIntervalMs: 100, multiplier: 1, maxIntervalMs: 100 },
    run: ({ name }) => ({ greeting: `Hello, ${name}`, version: 1 }),
  }),
];
