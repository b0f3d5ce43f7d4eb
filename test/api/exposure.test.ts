// Who may see and reach what, over real HTTP: stack traces only for the admin token not limited to
// namespaces, GraphiQL's page only behind a token, introspection as a setting, and the list of
// actions only for that admin.
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrator, type Orchestrator } from '../../src/workflow/orchestrator.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { gql, handOff, log, openSse, useApi, type GqlResponse } from './api-harness.ts';

const ADMIN = 'admin-token-0123456789';
const READ = 'read-token-0123456789';
const TEAM = 'team-default-token-0123';
const NAMESPACE_TOKENS = `default=${TEAM}`;
const STACK = 'Error: card declined\n    at charge (/srv/baton/actions/billing.ts:42:11)\n    at run (/srv/baton/node_modules/x/index.js:1:1)';
const ERROR = { message: 'card declined', type: 'PaymentError', stack: STACK };

describe('stack traces of failed actions', () => {
  const api = useApi({ adminToken: ADMIN, readToken: READ, namespaceTokens: NAMESPACE_TOKENS });
  let orchestrator: Orchestrator;
  let executionId: string;
  beforeAll(async () => {
    orchestrator = startOrchestrator({ store: api().store, log, sweepEveryMs: 0 });
    await orchestrator.ready;
    const submitted = await gql(api().url, `mutation { submitWorkflow(id: "billing-1", definition: { steps: [{ id: "charge", action: "core.noop", maxAttempts: 1 }] }) { workflowId } }`, {}, { token: ADMIN });
    expect(submitted.errors).toBeUndefined();
    executionId = await eventually('the step to be scheduled', async () => {
      await api().catchUp();
      const w = await gql(api().url, `{ workflow(id: "billing-1") { steps { executionId } } }`, {}, { token: ADMIN });
      return w.data!.workflow.steps[0].executionId ?? undefined;
    });
    const { runtime } = api();
    await handOff(runtime, executionId, 'w1');
    await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    await runtime.dispatch(executionId, { type: 'ExecutionFailed', data: { error: ERROR, retryable: false }, by: 'worker:w1' });
    await eventually('the workflow to fail', async () => {
      await api().catchUp();
      const w = await gql(api().url, `{ workflow(id: "billing-1") { status } }`, {}, { token: ADMIN });
      return w.data!.workflow.status === 'Failed' || undefined;
    });
  });
  afterAll(async () => {
    await orchestrator?.stop();
  });

  // The page's failed execution (others of this file's tests add executions that did not fail).
  const failedNode = (r: GqlResponse): { error: { stack?: string } } => r.data!.executions.edges.find((e: { node: { error: unknown } }) => e.node.error !== null).node;
  const EVERYWHERE = `query($id: ID!) {
    execution(id: $id) {
      error events { type data } history { data context } stateAt(revision: 4) { context event { data } }
    }
    executions(first: 5) { edges { node { error } } }
    events(executionId: $id) { data }
    workflow(id: "billing-1") { steps { error execution { error } } }
  }`;

  it('are left out for the read token wherever an error appears', async () => {
    const r = await gql(api().url, EVERYWHERE, { id: executionId }, { token: READ });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution.error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(r.data!.execution.events[4].data.error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(r.data!.execution.stateAt.context.error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(r.data!.workflow.steps[0].error).toMatchObject({ message: 'card declined' });
    expect(r.text).not.toMatch(/stack|\/srv\/baton|billing\.ts/);
  });

  it('are left out for a token limited to namespaces, though it may submit and cancel', async () => {
    // The workflow is another kind of object, refused to such a token as a whole.
    const query = EVERYWHERE.replace('workflow(id: "billing-1") { steps { error execution { error } } }', '');
    const r = await gql(api().url, query, { id: executionId }, { token: TEAM });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution.error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(r.data!.execution.history[4].context.error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(failedNode(r).error).toEqual({ message: 'card declined', type: 'PaymentError' });
    expect(r.text).not.toMatch(/stack|\/srv\/baton|billing\.ts/);
  });

  it('are the only thing left out: a user\'s own `stack` keys come back as stored, to every token', async () => {
    const input = { message: 'a pile of plates', stack: ['plate', 'plate'], nested: { message: 'm', stack: 'mine' } };
    const submitted = await gql(api().url, `mutation($input: JSON) { submitExecution(action: "core.echo", input: $input) { executionId } }`, { input }, { token: ADMIN });
    expect(submitted.errors).toBeUndefined();
    const id = submitted.data!.submitExecution.executionId as string;
    await handOff(api().runtime, id, 'w1');
    await api().runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
    await api().runtime.dispatch(id, { type: 'ExecutionProgressed', data: { details: input }, by: 'worker:w1' });
    await api().runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: input }, by: 'worker:w1' });
    await api().catchUp();
    for (const token of [READ, TEAM]) {
      const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { input result lastProgress events { data } } }`, { id }, { token });
      expect(r.errors, token).toBeUndefined();
      const e = r.data!.execution;
      expect([e.input, e.result, e.lastProgress, e.events[0].data.input, e.events.at(-1).data.result], token).toEqual([input, input, input, input, input]);
    }
  });

  it('are shown to the admin token', async () => {
    const r = await gql(api().url, EVERYWHERE, { id: executionId }, { token: ADMIN });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution.error).toEqual(ERROR);
    expect(r.data!.execution.events[4].data.error).toEqual(ERROR);
    expect(r.data!.execution.history[4].context.error).toEqual(ERROR);
    expect(r.data!.execution.stateAt.event.data.error).toEqual(ERROR);
    expect(r.data!.events[4].data.error.stack).toBe(STACK);
    expect(failedNode(r).error.stack).toBe(STACK);
    expect(r.data!.workflow.steps[0].error).toEqual({ message: 'card declined', type: 'PaymentError' }); // the orchestrator keeps no stack
    expect(r.data!.workflow.steps[0].execution.error.stack).toBe(STACK);
  });

  it('are left out of a read token’s subscription', async () => {
    for (const [token, stack] of [[READ, false], [ADMIN, true]] as const) {
      const sub = await openSse(api().url, `subscription($id: ID!) { executionUpdated(id: $id) { status error } }`, { id: executionId }, { headers: { authorization: `Bearer ${token}` } });
      try {
        const first = await sub.next();
        expect(first!.data.data.executionUpdated.status).toBe('Failed');
        expect('stack' in first!.data.data.executionUpdated.error, token).toBe(stack);
      } finally {
        await sub.close();
      }
    }
  });
});

describe('GraphiQL with tokens set', () => {
  const api = useApi({ adminToken: ADMIN, readToken: READ });
  const page = (headers: Record<string, string> = {}) => fetch(api().url, { headers: { accept: 'text/html', ...headers }, signal: AbortSignal.timeout(10_000) });

  it('is a short 401 page saying how to send a token, without one', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token' }] as Record<string, string>[]) {
      const res = await page(headers);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      const html = await res.text();
      expect(html).toMatch(/needs a token/);
      expect(html).toMatch(/Authorization: Bearer &lt;token&gt;/);
      expect(html.length).toBeLessThan(2_000);
    }
  });

  it('is served with a valid token, read or admin', async () => {
    for (const token of [READ, ADMIN]) {
      const res = await page({ authorization: `Bearer ${token}` });
      expect(res.status).toBe(200);
      expect(await res.text()).toMatch(/<title>Baton<\/title>/);
    }
  });
});

describe('BATON_API_INTROSPECTION=off', () => {
  const api = useApi({ introspection: false });

  it('refuses introspection queries and serves no GraphiQL, while queries work', async () => {
    const r = await gql(api().url, getIntrospectionQuery());
    expect(r.data ?? null).toBeNull();
    expect(r.errors![0]!.message).toMatch(/introspection is off on this server \(BATON_API_INTROSPECTION=off\)/);
    expect((await gql(api().url, `{ __type(name: "Execution") { name } }`)).errors![0]!.message).toMatch(/introspection is off on this server \(BATON_API_INTROSPECTION=off\)/);
    expect((await gql(api().url, `{ __typename workers { id } }`)).data).toEqual({ __typename: 'Query', workers: [] });
    const res = await fetch(api().url, { headers: { accept: 'text/html' }, signal: AbortSignal.timeout(5_000) });
    expect(res.status).toBe(404);
    expect(await res.text()).toMatch(/GraphiQL is off/);
  });
});

describe('introspection by default', () => {
  const api = useApi();

  it('answers', async () => {
    const r = await gql(api().url, `{ __schema { queryType { name } } }`);
    expect(r.data!.__schema.queryType.name).toBe('Query');
  });
});

describe('an unknown action', () => {
  const api = useApi({ adminToken: ADMIN, readToken: READ, namespaceTokens: NAMESPACE_TOKENS });
  const SUBMIT = `mutation { submitExecution(action: "billing.invoice.send") { executionId } }`;

  it('is named with the known actions to the admin token only', async () => {
    const admin = await gql(api().url, SUBMIT, {}, { token: ADMIN });
    expect(admin.errors![0]!.message).toMatch(/^action: unknown action "billing.invoice.send"; known actions: core\.echo/);
    const reader = await gql(api().url, SUBMIT, {}, { token: READ });
    expect(reader.status).toBe(403);
    expect(reader.text).not.toMatch(/core\.echo|known actions/);
    // A token limited to namespaces may submit, and is told what is wrong, but not what else runs here.
    const team = await gql(api().url, SUBMIT, {}, { token: TEAM });
    expect(team.errors![0]!.message).toBe('action: unknown action "billing.invoice.send"');
    expect(team.text).not.toMatch(/core\.echo|known actions/);
  });
});
