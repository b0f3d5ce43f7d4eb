// Archived executions and workflows over GraphQL: answered from the archive file (the /ui opens
// them like any other), or with an ARCHIVED error when the file cannot be read, never as
// "not found".
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowStreamId } from '../../schemas/workflow-events.ts';
import { executionArchivePath } from '../../src/retention/archive-file.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { workflowKind } from '../../src/runtime/workflow-kind.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { startApiServer } from '../../src/api/server.ts';
import { actions, gql, handOff, log, openSse, useApi } from './api-harness.ts';

const api = useApi();
let archiveDir: string;
let id: string;
let workflowId: string;
/** Archived too, for the files that cannot be read. */
let other: string;

const EVENTS = `query($id: ID!, $from: Long, $limit: Int) { events(executionId: $id, fromRevision: $from, limit: $limit) { eventId executionId revision globalPosition type by data occurredAt recordedAt } }`;
const SUBSCRIBE = `subscription($id: ID!) { executionUpdated(id: $id) { id status revision result archived { events } } }`;
const TYPES = ['ExecutionRequested', 'SchedulingStarted', 'ExecutionHandedOff', 'ExecutionStarted', 'ExecutionCompleted'];

async function complete(runtime: ReturnType<typeof api>['runtime'], executionId: string, result: { n: number }) {
  await handOff(runtime, executionId, 'w1');
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' });
  await runtime.dispatch(executionId, { type: 'ExecutionCompleted', data: { result }, by: 'worker:w1' });
}

beforeAll(async () => {
  archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-archive-api-'));
  const { runtime, store } = api();
  id = (await runtime.submit({ action: 'core.echo', input: { n: 1 } })).executionId;
  await complete(runtime, id, { n: 1 });
  other = (await runtime.submit({ action: 'core.echo', input: { n: 2 } })).executionId;
  await complete(runtime, other, { n: 2 });
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
  expect(s, JSON.stringify(s.skipped)).toMatchObject({ executions: 3, workflows: 1 });
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

  it('answers an archived execution’s events from its archive file, nested and top-level alike, as its history', async () => {
    const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { history { revision type } events { revision type globalPosition } } }`, { id });
    expect(r.errors).toBeUndefined();
    const { history, events } = r.data!.execution;
    expect(history.map((s: { type: string }) => s.type)).toEqual(TYPES);
    // The file keeps revisions, not the store's positions: null, not a made-up 0.
    expect(events).toEqual(history.map((s: { revision: number; type: string }) => ({ ...s, globalPosition: null })));
    const top = await gql(api().url, EVENTS, { id });
    expect(top.errors).toBeUndefined();
    expect(top.data!.events.map((e: { type: string }) => e.type)).toEqual(TYPES);
    expect(top.data!.events[2]).toMatchObject({ executionId: id, revision: 2, type: 'ExecutionHandedOff', by: 'executor', data: { workerId: 'w1', attempt: 1 }, globalPosition: null });
    expect(top.data!.events[4]).toMatchObject({ by: 'worker:w1', data: { result: { n: 1 } } });
    expect(top.data!.events[0].occurredAt).toEqual(expect.any(String));
    const window = await gql(api().url, EVENTS, { id, from: 3, limit: 1 });
    expect(window.data!.events.map((e: { revision: number }) => e.revision)).toEqual([3]);
  });

  it('says NOT_FOUND, naming executionId, for events of an id no execution has (a workflow’s id: saying so), and reads one not projected yet from the store', async () => {
    const none = randomUUID();
    const r = await gql(api().url, EVENTS, { id: none });
    expect(r.data).toBeNull();
    expect(r.errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND', argument: 'executionId' });
    expect(r.errors![0]!.message).toBe(`executionId: no execution ${none}`);
    const w = await gql(api().url, EVENTS, { id: workflowId });
    expect(w.errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND', argument: 'executionId' });
    expect(w.errors![0]!.message).toMatch(new RegExp(`^executionId: ${workflowId} is a workflow id \\(retention archived it at .*, with its steps\\), not an execution id$`));
    // A live workflow's id, in the store.
    const live = randomUUID();
    const started = workflowKind.make({ type: 'WorkflowStarted', data: { definition: { onFailure: 'fail-fast', steps: [{ id: 'a', action: 'core.noop', dependsOn: [] }] } } as never, by: 'executor' }, new Date().toISOString());
    await api().store.append(workflowStreamId(live), [{ eventId: randomUUID(), type: started.type, data: started.data, metadata: started.metadata }], { expectedRevision: 'no_stream' });
    const l = await gql(api().url, EVENTS, { id: live });
    expect(l.errors![0]!.message).toMatch(new RegExp(`^executionId: ${live} is a workflow id, not an execution id`));
    // Submitted, not projected yet: its events all the same, never NOT_FOUND.
    const fresh = (await api().runtime.submit({ action: 'core.noop' })).executionId;
    const f = await gql(api().url, EVENTS, { id: fresh });
    expect(f.errors).toBeUndefined();
    expect(f.data!.events.map((e: { type: string }) => e.type)).toEqual(['ExecutionRequested']);
    expect(f.data!.events[0].globalPosition).toEqual(expect.any(Number));
    // Projected, with nothing in the window asked for: an empty list, not NOT_FOUND.
    await api().catchUp();
    const past = await gql(api().url, EVENTS, { id: fresh, from: 5 });
    expect(past.errors).toBeUndefined();
    expect(past.data!.events).toEqual([]);
  });

  it('answers a subscription to an archived execution at once with its final state from the file, then ends', async () => {
    const sub = await openSse(api().url, SUBSCRIBE, { id });
    try {
      const started = Date.now();
      expect(await sub.next(3_000)).toEqual({ event: 'next', data: { data: { executionUpdated: { id, status: 'Completed', revision: 4, result: { n: 1 }, archived: { events: 5 } } } } });
      expect((await sub.next(3_000))?.event).toBe('complete');
      expect(Date.now() - started).toBeLessThan(3_000); // not after the 10 s wait for unknown ids
    } finally {
      await sub.close();
    }
  });

  it('refuses a subscription to a workflow’s id at once, saying it is one', async () => {
    const sub = await openSse(api().url, SUBSCRIBE, { id: workflowId });
    try {
      const first = await sub.next(3_000);
      expect(first!.data.errors[0].extensions).toMatchObject({ code: 'NOT_FOUND', argument: 'id' });
      expect(first!.data.errors[0].message).toMatch(new RegExp(`^id: ${workflowId} is a workflow id .*not an execution id`));
      expect((await sub.next(3_000))?.event).toBe('complete');
    } finally {
      await sub.close();
    }
  });

  it('says why an archive file could not be read: not there, a directory, not this history', async () => {
    const file = executionArchivePath(archiveDir, other);
    const moved = `${file}.moved`;
    await rename(file, moved);
    try {
      const r = await gql(api().url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other });
      expect(r.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'missing', reason: 'no file is there (moved or deleted?)', archive: file });
      expect(r.errors![0]!.message).toMatch(new RegExp(`^execution ${other} was archived at .* to ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, and that file could not be read there: no file is there \\(moved or deleted\\?\\)$`));
      // The same answer for events, top-level and nested, and for a subscription: never [] or NOT_FOUND.
      for (const q of [EVENTS, `query($id: ID!) { execution(id: $id) { events { type } } }`]) {
        expect((await gql(api().url, q, { id: other })).errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'missing' });
      }
      const sub = await openSse(api().url, SUBSCRIBE, { id: other });
      try {
        expect((await sub.next(3_000))!.data.errors[0].extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'missing' });
      } finally {
        await sub.close();
      }
      await mkdir(file);
      const dir = await gql(api().url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other });
      expect(dir.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'unreadable', reason: 'it is a directory, not a file' });
      await rm(file, { recursive: true });
      await writeFile(file, '{"format": "something else"}');
      const bad = await gql(api().url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other });
      expect(bad.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'invalid' });
      expect(bad.errors![0]!.message).toMatch(/, and that file could not be read there: it does not hold this history \(.*format/);
    } finally {
      await rm(file, { recursive: true, force: true });
      await rename(moved, file);
    }
    expect((await gql(api().url, `query($id: ID!) { execution(id: $id) { status } }`, { id: other })).data!.execution).toEqual({ status: 'Completed' });
  });

  it('to a token limited to namespaces, an archived execution whose file cannot be read is not found: no path, no time', async () => {
    const { db, runtime, store } = api();
    const TOKEN = 'team-a-token-0123456789';
    const scoped = await startApiServer({ pool: db.pool, runtime, store, actions, log, port: 0, adminToken: 'admin-token-0123456789', namespaceTokens: `team-a=${TOKEN}` });
    const file = executionArchivePath(archiveDir, other);
    const moved = `${file}.moved`;
    try {
      // Readable, the file says the namespace (default), which this token does not see.
      const readable = await gql(scoped.url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other }, { token: TOKEN });
      expect(readable.errors).toBeUndefined();
      expect(readable.data!.execution).toBeNull();
      await rename(file, moved);
      const r = await gql(scoped.url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other }, { token: TOKEN });
      expect(r.errors).toBeUndefined();
      expect(r.data!.execution).toBeNull();
      const events = await gql(scoped.url, EVENTS, { id: other }, { token: TOKEN });
      expect(events.errors![0]!.extensions).toMatchObject({ code: 'NOT_FOUND' });
      expect(JSON.stringify(events.errors)).not.toContain(archiveDir);
      // An admin still hears why.
      const admin = await gql(scoped.url, `query($id: ID!) { execution(id: $id) { id } }`, { id: other }, { token: 'admin-token-0123456789' });
      expect(admin.errors![0]!.extensions).toMatchObject({ code: 'ARCHIVED', unreadable: 'missing' });
    } finally {
      await rename(moved, file).catch(() => undefined);
      await scoped.close();
    }
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
