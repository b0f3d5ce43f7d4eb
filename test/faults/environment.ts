// The environment one test file shares: a private Postgres cluster and a private nats-server,
// started before its tests and removed after them, once its summary table is printed and written.
import { afterAll, beforeAll } from 'vitest';
import { PrivateNats } from './private-nats.ts';
import { PrivatePostgres } from './private-postgres.ts';
import { reportSummaries } from './summary.ts';

export interface FaultEnvironment {
  pg: PrivatePostgres;
  nats: PrivateNats;
}

/**
 * A private Postgres and nats-server for the enclosing test file: started in beforeAll,
 * stopped and removed in afterAll, after the summary table is printed and written.
 */
export function useFaultEnvironment(title: string): () => FaultEnvironment {
  let env: FaultEnvironment | undefined;
  beforeAll(async () => {
    const [pgServer, nats] = await Promise.allSettled([PrivatePostgres.start(), PrivateNats.start()]);
    if (pgServer.status === 'rejected' || nats.status === 'rejected') {
      if (pgServer.status === 'fulfilled') await pgServer.value.destroy();
      if (nats.status === 'fulfilled') await nats.value.destroy();
      throw pgServer.status === 'rejected' ? pgServer.reason : (nats as PromiseRejectedResult).reason;
    }
    env = { pg: pgServer.value, nats: nats.value };
  }, 180_000);
  afterAll(async () => {
    await reportSummaries(title);
    const e = env;
    env = undefined;
    await Promise.allSettled([e?.pg.destroy(), e?.nats.destroy()]);
  }, 120_000);
  return () => {
    if (!env) throw new Error('the fault environment exists only inside the tests of the file that called useFaultEnvironment()');
    return env;
  };
}
