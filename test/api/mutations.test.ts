// submitExecution and cancelExecution over real HTTP, checked against the event store.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { executionStreamId } from '../../schemas/events.ts';
import { submitWorkflow } from '../../src/workflow/service.ts';
import { actions, gql, handOff, useApi } from './api-harness.ts';

const api = useApi();
const SUBMIT = `mutation($action: String!, $input: JSON, $key: String, $maxAttempts: Int, $priority: Int) {
  submitExecution(action: $action, input: $input, idempotencyKey: $key, maxAttempts: $maxAttempts, priority: $priority) { executionId created status } }`;
const CANCEL = `mutation($id: ID!, $reason: String) { cancelExecution(id: $id, reason: $reason) { executionId status outcome message } }`;
const submit = (variables: Record<string, unknown>) => gql(api().url, SUBMIT, variables);
const streamLength = async (id: string) => (await api().store.readStream(executionStreamId(id))).length;

describe('submitExecution', () => {
  it('appends ExecutionRequested with the given options, and the read model shows it', async () => {
    const r = await submit({ action: 'core.sleep', input: { ms: 5 }, maxAttempts: 2, priority: 7 });
    expect(r.errors).toBeUndefined();
    expect(r.data!.submitExecution).toMatchObject({ created: true, status: 'Requested' });
    const id = r.data!.submitExecution.executionId;
    const [requested] = await api().store.readStream(executionStreamId(id));
    expect(requested).toMatchObject({ type: 'ExecutionRequested', data: { action: 'core.sleep', input: { ms: 5 }, maxAttempts: 2, priority: 7 } });
    await api().catchUp();
    const row = await gql(api().url, `query($id: ID!) { execution(id: $id) { status action input maxAttempts priority } }`, { id });
    expect(row.data!.execution).toEqual({ status: 'Requested', action: 'core.sleep', input: { ms: 5 }, maxAttempts: 2, priority: 7 });
  });

  it('refuses input that does not fit the action’s schema, naming the field, and appends nothing', async () => {
    const before = await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events');
    const r = await submit({ action: 'core.sleep', input: { ms: -1 } });
    expect(r.data).toBeNull();
    expect(r.errors![0]!.message).toMatch(/^input\.ms: /);
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input', problems: [{ path: 'input.ms', message: expect.any(String) }], issues: [{ path: 'input.ms' }] });
    const missing = await submit({ action: 'core.fail', input: {} });
    expect(missing.errors![0]!.message).toMatch(/^input\.message: /);
    const after = await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('refuses an unknown action, naming action', async () => {
    const r = await submit({ action: 'billing.invoice.send', input: {} });
    expect(r.errors![0]!.message).toMatch(/^action: unknown action "billing.invoice.send"; known actions: core\.echo/);
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'action' });
  });

  it('refuses out-of-range options, naming them', async () => {
    expect((await submit({ action: 'core.noop', maxAttempts: 0 })).errors![0]!.message).toMatch(/^maxAttempts: must be from 1 to 1000/);
    expect((await submit({ action: 'core.noop', key: '' })).errors![0]!.message).toMatch(/^idempotencyKey: must not be empty/);
  });

  it('returns the first execution for a repeated idempotency key, and refuses the key with a different body', async () => {
    const key = `order-${randomUUID()}`;
    const first = await submit({ action: 'core.echo', input: { n: 1 }, key });
    const again = await submit({ action: 'core.echo', input: { n: 1 }, key });
    expect(again.data!.submitExecution).toEqual({ ...first.data!.submitExecution, created: false });
    const different = await submit({ action: 'core.echo', input: { n: 2 }, key });
    expect(different.data).toBeNull();
    expect(different.errors![0]!.message).toMatch(/idempotency key ".*" already used by execution .* with a different request \(differs in input\)/);
    expect(different.errors![0]!.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', argument: 'idempotencyKey', executionId: first.data!.submitExecution.executionId });
    expect(await streamLength(first.data!.submitExecution.executionId)).toBe(1);
  });
});

describe('cancelExecution', () => {
  const submitted = async () => (await api().runtime.submit({ action: 'core.noop' })).executionId;

  it('cancels before the handoff (Requested and Scheduling), as the executor', async () => {
    const requested = await submitted();
    const r = await gql(api().url, CANCEL, { id: requested, reason: 'changed my mind' });
    expect(r.errors).toBeUndefined();
    expect(r.data!.cancelExecution).toEqual({ executionId: requested, status: 'Cancelled', outcome: 'CANCELLED', message: `execution ${requested} cancelled before any worker ran it` });
    const events = await api().store.readStream(executionStreamId(requested));
    expect(events.at(-1)).toMatchObject({ type: 'ExecutionCancelled', data: { reason: 'changed my mind' }, metadata: { by: 'executor' } });

    const scheduling = await submitted();
    await api().runtime.dispatch(scheduling, { type: 'SchedulingStarted', data: {}, by: 'executor' });
    const s = await gql(api().url, CANCEL, { id: scheduling });
    expect(s.data!.cancelExecution.status).toBe('Cancelled');
  });

  it('after the handoff, records a cancel request for the worker that holds it, once', async () => {
    const id = await submitted();
    await handOff(api().runtime, id, 'w7');
    await api().runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w7' });
    const r = await gql(api().url, CANCEL, { id, reason: 'stop it' });
    expect(r.errors).toBeUndefined();
    expect(r.data!.cancelExecution).toMatchObject({ executionId: id, status: 'Running', outcome: 'CANCEL_REQUESTED' });
    expect(r.data!.cancelExecution.message).toMatch(/is Running on worker w7: cancel requested/);
    const events = await api().store.readStream(executionStreamId(id));
    expect(events.at(-1)).toMatchObject({ type: 'ExecutionCancelRequested', data: { reason: 'stop it' }, metadata: { by: 'executor' } });
    const again = await gql(api().url, CANCEL, { id });
    expect(again.data!.cancelExecution).toMatchObject({ status: 'Running', outcome: 'ALREADY_REQUESTED' });
    expect(again.data!.cancelExecution.message).toMatch(/already requested \(stop it\); worker w7 is ending it/);
    expect(await streamLength(id)).toBe(5);
  });

  it('refuses a final execution and an unknown one clearly', async () => {
    const id = await submitted();
    await gql(api().url, CANCEL, { id });
    const again = await gql(api().url, CANCEL, { id });
    expect(again.errors![0]!.message).toBe(`execution ${id} is already Cancelled`);
    expect(again.errors![0]!.extensions!.code).toBe('CONFLICT');
    const unknown = randomUUID();
    const nf = await gql(api().url, CANCEL, { id: unknown });
    expect(nf.errors![0]!.message).toBe(`execution ${unknown} not found`);
    expect(nf.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    expect((await gql(api().url, CANCEL, { id: 'nope' })).errors![0]!.message).toMatch(/^id: must be an execution id/);
    // A workflow's id (baton cancel takes either): NOT_FOUND, saying what to use instead.
    const workflowId = randomUUID();
    await submitWorkflow({ store: api().store, runtime: api().runtime, actions }, { steps: [{ id: 'a', action: 'core.noop' }] }, { id: workflowId });
    const wf = await gql(api().url, CANCEL, { id: workflowId });
    expect(wf.errors![0]).toMatchObject({ message: `no execution ${workflowId}: that is a workflow's id; cancel it with cancelWorkflow(id: "${workflowId}")`, extensions: { code: 'NOT_FOUND' } });
  });
});
