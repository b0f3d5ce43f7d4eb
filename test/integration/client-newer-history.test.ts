// A history a newer Baton wrote (an event naming an execution machine version this build does not
// have), read through the typed client: both modes say so and name the version, the database
// mode with an error the package exports, never as a refused transition.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BatonApiError, UnknownMachineVersionError } from '@baton-run/baton';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { useClientPair } from '../support/client-pair.ts';
import { catchUpFully } from '../support/read-model.ts';

const { t, clients } = useClientPair();

describe('client.history() of a history a newer Baton wrote', () => {
  it('is UnknownMachineVersionError over the database and UNKNOWN_MACHINE_VERSION over GraphQL, naming the version', async () => {
    const newer = String(Number(MACHINE_VERSION) + 1);
    const { executionId } = await clients.database.submit('core.noop', null);
    await catchUpFully(t.db.pool, t.store); // the API finds the execution in the read model
    await t.store.append(
      `execution-${executionId}`,
      [{ eventId: randomUUID(), type: 'SchedulingStarted', data: {}, metadata: { by: 'executor', occurredAt: new Date().toISOString(), machineVersion: newer, stateAfter: 'Scheduling' } }],
      { expectedRevision: 0n },
    );
    const database = await clients.database.history(executionId).catch((e: unknown) => e);
    expect(database).toBeInstanceOf(UnknownMachineVersionError);
    expect(database).toMatchObject({ machineVersion: newer, newer: true, message: expect.stringContaining(`written by execution machine version ${newer}`) });
    const graphql = await clients.graphql.history(executionId).catch((e: unknown) => e);
    expect(graphql).toBeInstanceOf(BatonApiError);
    expect(graphql).toMatchObject({ code: 'UNKNOWN_MACHINE_VERSION', message: expect.stringContaining('upgrade Baton') });
  });
});
