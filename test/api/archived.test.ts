// Archived executions and workflows over GraphQL: answered from the archive file (the /ui opens
// them like any other), or with an ARCHIVED error when the file cannot be read, never as
// "not found".
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { executionArchivePath } from '../../src/retention/archive-file.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { workflowKind } from '../../src/runtime/workflow-kind.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { gql, handOff, useApi } from './api-harness.ts';

const api = useApi();
let archiveDir: string;
let id: string;
let workflowId: string;

beforeAll(async () => {
  archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-archive-api-'));
  const { runtime, store } = api();
  id = (await runtime.submit({ action: 'core.echo', input: { n: 1 } })).executionId;
  await handOff(runtime, id, 'w1');
  await runtime.dispatch(id, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(id, { type: 'ExecutionCompleted', data: { result: { n: 1 } }, by: 'worker:w1' });
  // A workflow of one step, finished.
  workflowId = randomUUID();
  const started = workflowKind.make({ type: 'WorkflowStarted', data: { definition: { onFailure: 'fail-fast', steps: [{ id: 'a', action: 'core.noop', dependsOn: [] }] } } as never, by: 'executor' }, new Date().toISOString());
  await store.append(workflowStreamId(workflowId), [{ eventId: randomUUID(), type: started.type, data: started.data, metadata: started.metadata }], { expectedRevision: 'no_stream' });
  const step = (await runtime.submit({ action: 'core.noop', input: null, workflowId })).executionId;
  await handOff(runtime, step, 'w1');
  await runtime.dispatch(step, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(step, { type: 'ExecutionCompleted', data: { result: null }, by: 'worker:w1' });
  const workflows = createWorkflowRuntime(store);
  await workflows.dispatch(workflowId, { type: 'WorkflowStepScheduled', data: { stepId: 'a', executionId: step }, by: 'executor' });
  await workflows.dispatch(workflowId, { type: 'WorkflowStepFinished', data: { stepId: 'a', executionId: step, outcome: 'Completed' }, by: 'executor' });
  await workflows.dispatch(workflowId, { type: 'WorkflowCompleted', data: {}, by: 'executor' });
  await api().catchUp();
  const s = await runRetention({ pool: api().db.pool, store, olderThanMs: 60_000, archiveDir, now: () => new Date(Date.now() + 3_600_000) });
  expect(s, JSON.stringify(s.skipped)).toMatchObject({ executions: 2, workflows: 1 });
});
afterAll(async () => {
  await rm(archiveDir, { recursive: true, force: true });
});

describe('archived histories', () => {
  it('answers an archived execution from its archive file, history included, with `archived` set', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { id status result archived { archive events } history { state } } }`, { id });
    expect(r.errors).toBeUndefined();
    expect(r.data!.execution).toMatchObject({ id, status: 'Completed', result: { n: 1 }, archived: { archive: executionArchivePath(archiveDir, id), events: 5 } });
    expect(r.data!.execution.history.map((s: { state: string }) => s.state)).toEqual(['Requested', 'Scheduling', 'Scheduled', 'Running', 'Completed']);
    const stored = await gql(api().url, `query { executions(first: 10) { edges { node { id } } } }`);
    expect(stored.data!.executions.edges).toEqual([]); // no longer in the read model
  });

  it('says ARCHIVED, with when and where, for an archived execution whose file this server cannot read, and for an archived workflow', async () => {
    await rm(executionArchivePath(archiveDir, id));
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { id } }`, { id });
    expect(r.data?.execution).toBeNull();
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', kind: 'execution', id, archive: executionArchivePath(archiveDir, id), events: 5 });
    const w = await gql(api().url, `query($id: ID!) { workflow(id: $id) { id } }`, { id: workflowId });
    expect(w.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', kind: 'workflow', id: workflowId });
    const none = await gql(api().url, `query($id: ID!) { execution(id: $id) { id } }`, { id: randomUUID() });
    expect(none.errors).toBeUndefined();
    expect(none.data!.execution).toBeNull();
  });
});
