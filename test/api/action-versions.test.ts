// Versioned actions through GraphQL: a pinned submission (argument or name@version), the version
// on Execution, a pin no live worker offers as its waiting reason, and refusals naming the argument.
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { gql, useApi } from './api-harness.ts';

const api = useApi({ staleAfterMs: 30_000 });
const SUBMIT = `mutation($action: String!, $v: Int) { submitExecution(action: $action, actionVersion: $v) { executionId status } }`;
const SHOW = `query($id: ID!) { execution(id: $id) { action actionVersion pinnedVersion waitingReason } }`;

async function submitted(variables: Record<string, unknown>): Promise<string> {
  const r = await gql(api().url, SUBMIT, variables);
  expect(r.errors).toBeUndefined();
  return r.data!.submitExecution.executionId as string;
}
const show = async (id: string) => (await gql(api().url, SHOW, { id })).data!.execution;

describe('submitExecution(actionVersion)', () => {
  it('pins the version in ExecutionRequested, by argument or by name@version, and Execution shows it', async () => {
    const byArg = await submitted({ action: 'core.echo', v: 2 });
    const byName = await submitted({ action: 'core.echo@3' });
    const newest = await submitted({ action: 'core.echo' });
    const requested = async (id: string) => (await api().store.readStream(executionStreamId(id)))[0]!.data;
    expect(await requested(byArg)).toMatchObject({ action: 'core.echo', actionVersion: 2 });
    expect(await requested(byName)).toMatchObject({ action: 'core.echo', actionVersion: 3 });
    expect(await requested(newest)).not.toHaveProperty('actionVersion');
    await api().catchUp();
    expect(await show(byArg)).toMatchObject({ action: 'core.echo', actionVersion: 2, pinnedVersion: 2 });
    expect(await show(newest)).toMatchObject({ actionVersion: null, pinnedVersion: null });
  });

  it('says a pin no live worker offers is why it waits, until a worker of that version beats', async () => {
    const liveness = createLivenessStore(api().db.pool);
    await liveness.beat({ workerId: 'w-v1', actions: ['core.noop'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false }, { starting: true });
    const v1 = await submitted({ action: 'core.noop', v: 1 });
    const v2 = await submitted({ action: 'core.noop', v: 2 });
    const newest = await submitted({ action: 'core.noop' });
    await api().catchUp();
    expect((await show(v1)).waitingReason).toBeNull(); // the bare name is version 1
    expect((await show(v2)).waitingReason).toBe('no live worker offers action "core.noop" at version 2 (pinned)');
    expect((await show(newest)).waitingReason).toBeNull();
    // A worker of version 2 beats: the v2 pin is offered, and a v1 pin is still offered by w-v1.
    await liveness.beat({ workerId: 'w-v2', actions: ['core.noop', 'core.noop@2'], runtimes: ['node'], capacity: 1, inFlight: 0, draining: false }, { starting: true });
    expect((await show(v2)).waitingReason).toBeNull();
    expect((await show(v1)).waitingReason).toBeNull();
    // Only version 2 left: version 1 is not offered, though the bare name still is.
    await liveness.remove('w-v1');
    expect((await show(v1)).waitingReason).toBe('no live worker offers action "core.noop" at version 1 (pinned)');
  });

  it('refuses a bad version naming the argument, and appends nothing', async () => {
    const before = (await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n;
    for (const [variables, argument, message] of [
      [{ action: 'core.echo', v: 0 }, 'actionVersion', /whole number from 1 to 1000000/],
      [{ action: 'core.echo@zero' }, 'action', /the version after "@" must be a whole number/],
      [{ action: 'core.echo@2', v: 3 }, 'actionVersion', /contradicts the version in action/],
      [{ action: 'core.ehco@2' }, 'action', /unknown action "core.ehco"; did you mean "core.echo"/],
    ] as const) {
      const r = await gql(api().url, SUBMIT, variables);
      expect(r.data).toBeNull();
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument });
      expect(r.errors![0]!.message).toMatch(message);
    }
    expect((await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n).toBe(before);
  });
});
