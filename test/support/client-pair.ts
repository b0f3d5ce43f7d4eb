// The typed client's tests compare its two modes: a test store, the GraphQL API over it (no
// worker unless the file starts one), and one client of each mode, closed before the store.
import { beforeAll } from 'vitest';
import { createClient, type AnyActionDefinition, type BatonClient } from '@baton-run/baton';
import { builtinActions } from '../../src/actions/builtin.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { startApiServer, type ApiServer } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { useTestStore, type TestStore } from './test-store.ts';

export interface ClientPair {
  t: TestStore;
  clients: Record<'database' | 'graphql', BatonClient>;
  api: () => ApiServer;
}

/**
 * `actions`: what the API offers beside the built-ins; the clients are given them too when
 * `clientsKnowActions`. `beforeClose`: the file's own hosts to stop, after the clients and the API.
 */
export function useClientPair(o: { actions?: AnyActionDefinition[]; clientsKnowActions?: boolean; beforeClose?: () => Promise<void> } = {}): ClientPair {
  const actions = o.actions ?? [];
  const clients = {} as Record<'database' | 'graphql', BatonClient>;
  let api: ApiServer | undefined;
  const t = useTestStore({
    max: 10,
    beforeClose: async () => {
      await clients.database?.close();
      await clients.graphql?.close();
      await api?.close();
      await o.beforeClose?.();
    },
  });
  beforeAll(async () => {
    api = await startApiServer({ pool: t.db.pool, runtime: createExecutionRuntime(t.store), store: t.store, actions: createActionRegistry([...builtinActions, ...actions]), log: silentLogger(), port: 0 });
    const known = o.clientsKnowActions ? { actions } : {};
    clients.database = await createClient({ databaseUrl: t.db.url, ...known });
    clients.graphql = await createClient({ graphqlUrl: api.url, ...known });
  });
  return {
    t,
    clients,
    api: () => {
      if (!api) throw new Error('useClientPair(): only inside tests and hooks');
      return api;
    },
  };
}
