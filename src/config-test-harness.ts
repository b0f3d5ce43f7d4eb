// What the test harness (test/support) reads from the environment besides Baton's own
// configuration (config.ts): whether NATS is required, where it is, and whether this is CI.
import { z } from 'zod';
import { DEFAULT_NATS_URL, parseEnv } from './config.ts';
import { flag, unsetIfEmpty, urlWith } from './config-values.ts';

export interface TestHarnessConfig {
  /** BATON_REQUIRE_NATS=1: fail the whole test run when NATS is unreachable instead of skipping NATS tests. */
  readonly requireNats: boolean;
  /** BATON_NATS_URL, or nats://127.0.0.1:4222. */
  readonly natsUrl: string;
  /** CI is set (to anything but "" / "0" / "false"). */
  readonly ci: boolean;
}

const TestEnvSchema = z.object({
  BATON_REQUIRE_NATS: flag('BATON_REQUIRE_NATS'),
  BATON_NATS_URL: z.preprocess(unsetIfEmpty, urlWith(['nats', 'tls'], 'nats://host:4222').default(DEFAULT_NATS_URL)),
  // CI systems set CI to all sorts of values ("true", "1", "woodpecker"); only "", "0" and "false" mean no.
  CI: z.preprocess(unsetIfEmpty, z.string().optional()).transform((v) => v !== undefined && !['0', 'false'].includes(v.toLowerCase())),
});

export function loadTestHarnessConfig(env: NodeJS.ProcessEnv = process.env): TestHarnessConfig {
  const e = parseEnv(TestEnvSchema, env);
  return Object.freeze({ requireNats: e.BATON_REQUIRE_NATS, natsUrl: e.BATON_NATS_URL, ci: e.CI });
}
