// submitWorkflow, workflow and cancelWorkflow over real HTTP, with an orchestrator following
// the same store (no executor: step executions stay in Requested, so cancelling ends them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOrchestrator, type Orchestrator } from '../../src/workflow/orchestrator.ts';
import { badWorkflows, eventually } from '../support/workflow-cluster.ts';
import { gql, log, useApi } from './api-harness.ts';

const api = useApi();
const SUBMIT = `mutation($definition: JSON!, $id: ID) { submitWorkflow(definition: $definition, id: $id) { workflowId created status steps } }`;
const CANCEL = `mutation($id: ID!, $reason: String) { cancelWorkflow(id: $id, reason: $reason) { workflowId outcome status message } }`;
const WORKFLOW = `query($id: ID!) { workflow(id: $id) {
  id name status onFailure revision startedAt finishedAt cancelReason reason failedSteps
  steps { id action dependsOn status executionId execution { id status action workflowId parentId } }
} }`;
const eventCount = async () => (await api().db.pool.query('SELECT count(*)::int AS n FROM baton_events')).rows[0].n as number;

describe('submitWorkflow refuses bad definitions', () => {
  it.each(badWorkflows)('$name: BAD_USER_INPUT naming the path, and nothing stored', async ({ definition, expect: message }) => {
    const before = await eventCount();
    const r = await gql(api().url, SUBMIT, { definition });
    expect(r.data).toBeNull();
    expect(r.errors![0]!.message).toMatch(new RegExp(`^invalid workflow \\(1 problem\\): definition\\.${message.source}`));
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'definition', problems: [{ path: expect.stringMatching(/^definition\.steps/) }] });
    expect(await eventCount()).toBe(before);
    expect(before).toBe(0);
  });

  it('refuses a bad id and a definition that is not an object, naming them', async () => {
    const r = await gql(api().url, SUBMIT, { definition: { steps: [{ id: 'a', action: 'core.noop' }] }, id: 'no spaces please' });
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'id', problems: [{ path: 'id' }] });
    const n = await gql(api().url, SUBMIT, { definition: 42 });
    expect(n.errors![0]!.message).toMatch(/^invalid workflow \(1 problem\): definition: /);
    expect((await gql(api().url, WORKFLOW, { id: 'no spaces please' })).errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'id' });
    expect(await eventCount()).toBe(0);
  });
});

describe('workflow and cancelWorkflow', () => {
  let orchestrator: Orchestrator;
  beforeAll(async () => {
    orchestrator = startOrchestrator({ store: api().store, log, sweepEveryMs: 0 });
    await orchestrator.ready;
  });
  afterAll(async () => {
    await orchestrator?.stop();
  });

  it('runs a workflow\'s steps in its namespace', async () => {
    const definition = { steps: [{ id: 'a', action: 'core.noop' }] };
    const r = await gql(api().url, `mutation($d: JSON!) { submitWorkflow(definition: $d, id: "ns-wf", namespace: "team-w") { created } }`, { d: definition });
    expect(r.data!.submitWorkflow.created).toBe(true);
    const again = await gql(api().url, `mutation($d: JSON!) { submitWorkflow(definition: $d, id: "ns-wf") { created } }`, { d: definition });
    expect(again.errors![0]!.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' }); // another namespace is another workflow
    const step = await eventually('step a to be scheduled', async () => {
      await api().catchUp();
      return (await gql(api().url, WORKFLOW, { id: 'ns-wf' })).data!.workflow.steps[0].executionId as string | null ?? undefined;
    });
    expect((await api().runtime.load(step)).snapshot.context.namespace).toBe('team-w');
    await gql(api().url, CANCEL, { id: 'ns-wf', reason: 'done' });
  });

  it('shows a submitted workflow and its steps with their executions; cancelling ends it, and then is too late', async () => {
    const definition = { name: 'nightly', steps: [{ id: 'a', action: 'core.noop' }, { id: 'b', action: 'core.echo', dependsOn: ['a'] }] };
    const submitted = await gql(api().url, SUBMIT, { definition, id: 'nightly-1' });
    expect(submitted.data!.submitWorkflow).toEqual({ workflowId: 'nightly-1', created: true, status: 'Running', steps: 2 });
    expect((await gql(api().url, SUBMIT, { definition, id: 'nightly-1' })).data!.submitWorkflow.created).toBe(false);
    const conflict = await gql(api().url, SUBMIT, { definition: { ...definition, name: 'other' }, id: 'nightly-1' });
    expect(conflict.errors![0]!.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', argument: 'id' });

    // The orchestrator submits `a` (no executor here: it stays in Requested).
    const scheduled = await eventually('step a to be scheduled', async () => {
      await api().catchUp();
      const w = (await gql(api().url, WORKFLOW, { id: 'nightly-1' })).data!.workflow;
      return w.steps[0].status === 'Scheduled' && w.steps[0].execution ? w : undefined;
    });
    expect(scheduled).toMatchObject({ id: 'nightly-1', name: 'nightly', status: 'Running', onFailure: 'fail-fast', finishedAt: null, failedSteps: [] });
    expect(scheduled.steps[0]).toMatchObject({ id: 'a', action: 'core.noop', dependsOn: [], execution: { status: 'Requested', action: 'core.noop', workflowId: 'nightly-1', parentId: null } });
    expect(scheduled.steps[0].execution.id).toBe(scheduled.steps[0].executionId);
    expect(scheduled.steps[1]).toMatchObject({ id: 'b', dependsOn: ['a'], status: 'Pending', executionId: null, execution: null });

    const cancelled = await gql(api().url, CANCEL, { id: 'nightly-1', reason: 'not tonight' });
    expect(cancelled.data!.cancelWorkflow).toMatchObject({ workflowId: 'nightly-1', outcome: 'CANCEL_REQUESTED', status: 'Cancelling' });
    const ended = await eventually('the workflow to end', async () => {
      await api().catchUp();
      const w = (await gql(api().url, WORKFLOW, { id: 'nightly-1' })).data!.workflow;
      return w.status === 'Cancelled' && w.steps[0].execution?.status === 'Cancelled' ? w : undefined;
    });
    expect(ended).toMatchObject({ cancelReason: 'not tonight', reason: 'not tonight', finishedAt: expect.any(String) });
    expect(ended.steps.map((s: { status: string }) => s.status)).toEqual(['Cancelled', 'Skipped']);
    const late = await gql(api().url, CANCEL, { id: 'nightly-1' });
    expect(late.errors![0]).toMatchObject({ message: 'workflow nightly-1 is already Cancelled; there is nothing to cancel', extensions: { code: 'CONFLICT' } });
  });

  it('answers null for an unknown workflow and NOT_FOUND when cancelling one', async () => {
    expect((await gql(api().url, WORKFLOW, { id: 'nope' })).data).toEqual({ workflow: null });
    expect((await gql(api().url, CANCEL, { id: 'nope' })).errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND' });
  });
});
