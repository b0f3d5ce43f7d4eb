// Time-travel over GraphQL: history and stateAt fold the stream from the event store through
// the machine; executionMachine describes the statechart.
import { beforeAll, describe, expect, it } from 'vitest';
import { MACHINE_VERSION } from '../../actors/execution.machine.ts';
import { createExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { gql, handOff, useApi } from './api-harness.ts';

const api = useApi();
const BASE = Date.parse('2030-02-01T00:00:00.000Z');
let id: string;

beforeAll(async () => {
  let now = BASE;
  const runtime = createExecutionRuntime(api().store, { clock: () => new Date(now) });
  id = (await runtime.submit({ action: 'core.echo', input: { n: 1 } })).executionId;
  now += 1_000;
  await handOff(runtime, id, 'w1'); // revisions 1 and 2 at BASE + 1 s
  now += 1_000;
  await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  now += 1_000;
  await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { n: 1 } }, by: 'worker:w1' });
  await api().catchUp();
});

const STEP = 'revision type by state stateBefore owner attempt changed context machineVersion';

describe('Execution.history', () => {
  it('gives every event with the state it led to, folded through the machine', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { history { ${STEP} } } }`, { id });
    expect(r.errors).toBeUndefined();
    const steps = r.data!.execution.history;
    expect(steps.map((s: any) => s.state)).toEqual(['Requested', 'Scheduling', 'Scheduled', 'Running', 'Completed']);
    expect(steps.map((s: any) => s.stateBefore)).toEqual([null, 'Requested', 'Scheduling', 'Scheduled', 'Running']);
    expect(steps.map((s: any) => s.owner)).toEqual(['executor', 'executor', 'worker:w1', 'worker:w1', 'worker:w1']);
    expect(steps[2].changed).toEqual(expect.arrayContaining(['owner', 'workerId', 'deadline', 'owners', 'scheduledAt']));
    expect(steps[4].context).toMatchObject({ result: { n: 1 }, owners: ['executor', 'worker:w1'] });
    expect(steps.every((s: any) => s.machineVersion === MACHINE_VERSION)).toBe(true);
  });

  it('pages with fromRevision and limit, and refuses a limit past 1000', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { history(fromRevision: 3, limit: 1) { revision type } } }`, { id });
    expect(r.data!.execution.history).toEqual([{ revision: 3, type: 'ExecutionStarted' }]);
    const bad = await gql(api().url, `query($id: ID!) { execution(id: $id) { history(limit: 1001) { revision } } }`, { id });
    expect(bad.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(bad.errors?.[0]?.message).toMatch(/limit/);
  });
});

describe('Execution.stateAt', () => {
  const STATE = `revision status owner attempt final next { type by } event { type by }`;

  it('gives the state after a revision, with the event that led there and what may come next', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { stateAt(revision: 2) { ${STATE} } } }`, { id });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution.stateAt).toEqual({
      revision: 2,
      status: 'Scheduled',
      owner: 'worker:w1',
      attempt: 1,
      final: false,
      event: { type: 'ExecutionHandedOff', by: 'executor' },
      next: [
        { type: 'ExecutionStarted', by: 'worker:w1' },
        { type: 'ExecutionCancelRequested', by: 'executor' },
        { type: 'ExecutionCancelled', by: 'worker:w1' },
        { type: 'OwnershipReleased', by: 'worker:w1' },
        { type: 'OwnershipReclaimed', by: 'executor' },
      ],
    });
  });

  it('gives the state at an instant: the last event recorded by then, or null before the first', async () => {
    const q = `query($id: ID!, $at: DateTime) { execution(id: $id) { stateAt(at: $at) { revision status } } }`;
    const now = await gql(api().url, q, { id, at: new Date(Date.now() + 60_000).toISOString() });
    expect(now.data!.execution.stateAt).toEqual({ revision: 4, status: 'Completed' });
    const before = await gql(api().url, q, { id, at: '2000-01-01T00:00:00Z' });
    expect(before.errors).toBeUndefined();
    expect(before.data!.execution.stateAt).toBeNull();
  });

  it('refuses neither or both of revision and at, and a revision past the end', async () => {
    for (const args of ['', '(revision: 1, at: "2030-01-01T00:00:00Z")', '(revision: 5)']) {
      const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { stateAt${args} { revision } } }`, { id });
      expect(r.errors?.[0]?.extensions?.code, args).toBe('BAD_USER_INPUT');
    }
  });
});

describe('executionMachine', () => {
  it("describes the machine's states and transitions", async () => {
    const r = await gql(api().url, `{ executionMachine { version initial states { name final } transitions { from to event } } }`);
    expect(r.errors).toBeUndefined();
    const m = r.data!.executionMachine;
    expect(m.initial).toBe('Requested');
    expect(m.states).toContainEqual({ name: 'Completed', final: true });
    expect(m.states).toContainEqual({ name: 'Running', final: false });
    expect(m.transitions).toContainEqual({ from: 'Running', to: 'Completed', event: 'ExecutionCompleted' });
    expect(m.transitions).toContainEqual({ from: 'Running', to: 'Running', event: 'ExecutionProgressed' });
  });
});
