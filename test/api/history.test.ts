// Time-travel over GraphQL: history and stateAt fold the stream from the event store through
// the machine; executionMachine describes the statechart.
import { randomUUID } from 'node:crypto';
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

describe('a history a newer Baton wrote', () => {
  it('history, stateAt and whatIf say so with their own code, naming the version and the event: not a refused transition', async () => {
    const newer = String(Number(MACHINE_VERSION) + 1);
    const runtime = createExecutionRuntime(api().store);
    const { executionId } = await runtime.submit({ action: 'core.noop' });
    await api().catchUp();
    // What a newer build would append next: an ordinary event, naming its own machine version.
    const metadata = { by: 'executor', occurredAt: new Date().toISOString(), machineVersion: newer, stateAfter: 'Scheduling' };
    await api().store.append(`execution-${executionId}`, [{ eventId: randomUUID(), type: 'SchedulingStarted', data: {}, metadata }], { expectedRevision: 0n });
    const fields = ['history { revision }', 'stateAt(revision: 0) { status }', 'whatIf(fromRevision: 0, events: [{ type: "SchedulingStarted" }]) { ok }'];
    for (const field of fields) {
      const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { ${field} } }`, { id: executionId });
      expect(r.errors?.[0]?.extensions, field).toMatchObject({ code: 'UNKNOWN_MACHINE_VERSION', machineVersion: newer, knownVersions: `1–${MACHINE_VERSION}`, newer: true, executionId, revision: 1 });
      expect(r.errors?.[0]?.message, field).toBe(
        `execution ${executionId}: the event at revision 1 (SchedulingStarted) was written by execution machine version ${newer}; this build of Baton knows versions 1–${MACHINE_VERSION}: upgrade Baton to read this history`,
      );
    }
  });
});

describe('Execution.whatIf', () => {
  it('names a malformed event by its path in events, counted as GraphQL counts every argument path (from 0)', async () => {
    const events = [{ type: 'ExecutionProgressed' }, { type: 'ExecutionFailed', data: { retryable: false } }];
    const r = await gql(api().url, `query($id: ID!, $events: [WhatIfEventInput!]!) { execution(id: $id) { whatIf(fromRevision: 3, events: $events) { ok } } }`, { id, events });
    expect(r.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'events', problems: [{ path: 'events.1.data.error', message: expect.any(String) }] });
    expect(r.errors?.[0]?.message).toMatch(/^events\.1\.data\.error: /);
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
