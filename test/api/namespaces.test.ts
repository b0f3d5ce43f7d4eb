// Namespaces through GraphQL: submitted into one, listed by one, and tokens scoped to namespaces
// that never see or touch another's executions (queries filtered, by-id lookups not found,
// mutations refused).
import { describe, expect, it } from 'vitest';
import { namespaceStreamId } from '../../schemas/namespace-events.ts';
import { gql, openSse, useApi, type GqlResponse } from './api-harness.ts';

const ADMIN = 'admin-token-0123456789';
const TOKEN_A = 'team-a-token-0123456789';
const TOKEN_BC = 'team-bc-token-0123456789';

const SUBMIT = `mutation($ns: String, $key: String) { submitExecution(action: "core.noop", namespace: $ns, idempotencyKey: $key) { executionId created } }`;
const LIST = `query($ns: String) { executions(first: 100, filter: { namespace: $ns }) { edges { node { id namespace } } } }`;
const ONE = `query($id: ID!) { execution(id: $id) { id namespace } }`;
const EVENTS = `query($id: ID!) { events(executionId: $id) { type } }`;
const CANCEL = `mutation($id: ID!) { cancelExecution(id: $id) { outcome } }`;

describe('namespaces', () => {
  const api = useApi({ adminToken: ADMIN, namespaceTokens: `team-a=${TOKEN_A}; team-b,team-c=${TOKEN_BC}`, unknownExecutionGraceMs: 300 });
  const submit = async (ns: string | undefined, token: string, key?: string) => gql(api().url, SUBMIT, { ns, key }, { token });
  const ids = (r: GqlResponse) => (r.data!.executions.edges as { node: { id: string; namespace: string } }[]).map((e) => e.node);

  it('records the namespace, creates it once, lists by it; no namespace means default', async () => {
    const a1 = await submit('team-a', ADMIN);
    const a2 = await submit('team-a', ADMIN);
    const d = await submit(undefined, ADMIN);
    expect(a1.errors).toBeUndefined();
    await api().catchUp();
    const stream = await api().store.readStream(namespaceStreamId('team-a'));
    expect(stream.map((e) => e.type)).toEqual(['NamespaceCreated']);
    const inA = ids(await gql(api().url, LIST, { ns: 'team-a' }, { token: ADMIN }));
    expect(inA.map((n) => n.id).sort()).toEqual([a1.data!.submitExecution.executionId, a2.data!.submitExecution.executionId].sort());
    const inDefault = ids(await gql(api().url, LIST, { ns: 'default' }, { token: ADMIN }));
    expect(inDefault).toEqual([{ id: d.data!.submitExecution.executionId, namespace: 'default' }]);
  });

  it('keeps idempotency keys apart per namespace', async () => {
    const a = await submit('team-a', ADMIN, 'order-1');
    const b = await submit('team-b', ADMIN, 'order-1');
    const again = await submit('team-a', ADMIN, 'order-1');
    expect(a.data!.submitExecution.created).toBe(true);
    expect(b.data!.submitExecution.created).toBe(true);
    expect(b.data!.submitExecution.executionId).not.toBe(a.data!.submitExecution.executionId);
    expect(again.data!.submitExecution).toEqual({ executionId: a.data!.submitExecution.executionId, created: false });
  });

  it('refuses a bad namespace name, naming the argument, and stores nothing', async () => {
    for (const bad of ['Team-A', '-a', 'a_b', 'x'.repeat(64), '']) {
      const r = await submit(bad, ADMIN);
      expect(r.errors![0]!.extensions!.code, bad).toBe('BAD_USER_INPUT');
      expect(r.errors![0]!.message, bad).toMatch(/^namespace: /);
    }
    const f = await gql(api().url, LIST, { ns: 'NOPE' }, { token: ADMIN });
    expect(f.errors![0]!.message).toMatch(/^filter\.namespace: /);
  });

  it('access says what each token may do: every namespace for the admin token, its own for a scoped one', async () => {
    const ACCESS = '{ access { mayChange namespaces } }';
    expect((await gql(api().url, ACCESS, {}, { token: ADMIN })).data).toEqual({ access: { mayChange: true, namespaces: null } });
    expect((await gql(api().url, ACCESS, {}, { token: TOKEN_A })).data).toEqual({ access: { mayChange: true, namespaces: ['team-a'] } });
    expect((await gql(api().url, ACCESS, {}, { token: TOKEN_BC })).data).toEqual({ access: { mayChange: true, namespaces: ['team-b', 'team-c'] } });
  });

  it('a token for team-a never sees or touches team-b', async () => {
    const a = (await submit('team-a', TOKEN_A)).data!.submitExecution.executionId as string;
    const b = (await submit('team-b', TOKEN_BC)).data!.submitExecution.executionId as string;
    await api().catchUp();

    // Queries: filtered to its namespaces, whatever the filter asks for.
    const listed = ids(await gql(api().url, LIST, {}, { token: TOKEN_A }));
    expect(listed.length).toBeGreaterThan(0);
    expect(new Set(listed.map((n) => n.namespace))).toEqual(new Set(['team-a']));
    expect(ids(await gql(api().url, LIST, { ns: 'team-b' }, { token: TOKEN_A }))).toEqual([]);
    // By id: another namespace's execution is not there.
    expect((await gql(api().url, ONE, { id: b }, { token: TOKEN_A })).data!.execution).toBeNull();
    expect((await gql(api().url, ONE, { id: a }, { token: TOKEN_A })).data!.execution).toEqual({ id: a, namespace: 'team-a' });
    // Its events: NOT_FOUND, in the very words an id no execution has gets.
    const bEvents = await gql(api().url, EVENTS, { id: b }, { token: TOKEN_A });
    const noneId = '00000000-0000-4000-8000-000000000000';
    const none = await gql(api().url, EVENTS, { id: noneId }, { token: TOKEN_A });
    expect(bEvents.errors![0]!).toMatchObject({ message: `executionId: no execution ${b}`, extensions: { code: 'NOT_FOUND', argument: 'executionId' } });
    expect(none.errors![0]!).toMatchObject({ message: `executionId: no execution ${noneId}`, extensions: { code: 'NOT_FOUND', argument: 'executionId' } });
    expect((await gql(api().url, EVENTS, { id: a }, { token: TOKEN_A })).data!.events).toEqual([{ type: 'ExecutionRequested' }]);
    // Mutations: submitting elsewhere is refused, cancelling another's execution is not found.
    const elsewhere = await submit('team-b', TOKEN_A);
    expect(elsewhere.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(elsewhere.errors![0]!.message).toMatch(/^namespace: /);
    const noDefault = await submit(undefined, TOKEN_A);
    expect(noDefault.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    const cancel = await gql(api().url, CANCEL, { id: b }, { token: TOKEN_A });
    expect(cancel.errors![0]!.extensions!.code).toBe('NOT_FOUND');
    const bHistory = await api().store.readStream(`execution-${b}`);
    expect(bHistory.map((e) => e.type)).toEqual(['ExecutionRequested']);
    // What the API cannot yet tell apart by namespace is refused as a whole.
    const workers = await gql(api().url, `{ workers { id } }`, {}, { token: TOKEN_A });
    expect(workers.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    // Through top-level fragments as code generators write them: the fields inside are what count.
    const viaInline = await gql(api().url, `{ ... on Query { executions(first: 5) { edges { node { namespace } } } } }`, {}, { token: TOKEN_A });
    expect(viaInline.errors).toBeUndefined();
    expect(new Set(viaInline.data!.executions.edges.map((e: { node: { namespace: string } }) => e.node.namespace))).toEqual(new Set(['team-a']));
    const viaSpread = await gql(api().url, `fragment F on Query { execution(id: "${a}") { id } } query { ...F }`, {}, { token: TOKEN_A });
    expect(viaSpread.data).toEqual({ execution: { id: a } });
    const hidden = await gql(api().url, `fragment W on Query { ... on Query { workers { id } } } query { ...W execution(id: "${a}") { id } }`, {}, { token: TOKEN_A });
    expect(hidden.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(hidden.errors![0]!.message).toMatch(/: workers is not available to it/);
    // The two-namespace token sees both of its own, and the admin token everything.
    const bc = ids(await gql(api().url, LIST, {}, { token: TOKEN_BC }));
    expect(new Set(bc.map((n) => n.namespace))).toEqual(new Set(['team-b']));
    expect((await gql(api().url, CANCEL, { id: a }, { token: TOKEN_A })).data!.cancelExecution.outcome).toBe('CANCELLED');
  });

  it("a token's subscription to another namespace's execution is one to an execution that does not exist: no update, the same NOT_FOUND, then the end", async () => {
    const SUB = `subscription($id: ID!) { executionUpdated(id: $id) { id status } }`;
    const b = (await submit('team-b', TOKEN_BC)).data!.submitExecution.executionId as string;
    await api().catchUp();
    const missing = '00000000-0000-4000-8000-00000000000b';
    const answers: { message: string; ended: boolean; ms: number }[] = [];
    for (const id of [b, missing]) {
      const sub = await openSse(api().url, SUB, { id }, { headers: { authorization: `Bearer ${TOKEN_A}` } });
      try {
        const started = Date.now();
        if (id === b) {
          // It moves on meanwhile: the other namespace's token hears nothing of it.
          await gql(api().url, CANCEL, { id: b }, { token: TOKEN_BC });
          await api().catchUp();
        }
        const first = await sub.next(5_000);
        expect(first!.data.errors[0].extensions.code).toBe('NOT_FOUND');
        answers.push({ message: first!.data.errors[0].message.replace(id, '<id>'), ended: (await sub.next())?.event === 'complete', ms: Date.now() - started });
      } finally {
        await sub.close();
      }
    }
    expect(answers[0]).toEqual({ ...answers[1], ms: answers[0]!.ms });
    expect(answers[0]!.ended).toBe(true);
    for (const a of answers) expect(a.ms).toBeGreaterThanOrEqual(250); // the same wait: no quick answer gives it away
  });

  it('runs a schedule\'s ticks in its namespace', async () => {
    const created = await gql(api().url, `mutation { createSchedule(id: "ns-tick", every: "1h", action: "core.noop", namespace: "team-c") { schedule { id namespace } } }`, {}, { token: ADMIN });
    expect(created.data!.createSchedule.schedule).toEqual({ id: 'ns-tick', namespace: 'team-c' });
    const bad = await gql(api().url, `mutation { createSchedule(id: "ns-bad", every: "1h", action: "core.noop", namespace: "C") { schedule { id } } }`, {}, { token: ADMIN });
    expect(bad.errors![0]!.message).toMatch(/^namespace: /);
    const fired = await gql(api().url, `mutation { triggerSchedule(id: "ns-tick") { targetId started } }`, {}, { token: ADMIN });
    expect(fired.data!.triggerSchedule.started).toBe(true);
    const id = fired.data!.triggerSchedule.targetId as string;
    expect((await api().runtime.load(id)).snapshot.context.namespace).toBe('team-c');
    await api().catchUp();
    expect((await gql(api().url, ONE, { id }, { token: TOKEN_BC })).data!.execution).toEqual({ id, namespace: 'team-c' });
    expect((await gql(api().url, ONE, { id }, { token: TOKEN_A })).data!.execution).toBeNull();
  });

  it('submitExecutions: a namespace per input, keys per namespace, and a scoped token only into its own', async () => {
    const MANY = `mutation($inputs: [SubmitExecutionInput!]!) { submitExecutions(inputs: $inputs) { created results { executionId created error { code } } } }`;
    const inputs = [
      { action: 'core.noop', idempotencyKey: 'batch-1', namespace: 'team-a' },
      { action: 'core.noop', idempotencyKey: 'batch-1', namespace: 'team-b' },
      { action: 'core.noop', idempotencyKey: 'batch-1', namespace: 'team-a' },
    ];
    const r = await gql(api().url, MANY, { inputs }, { token: ADMIN });
    expect(r.errors, JSON.stringify(r.errors)).toBeUndefined();
    const [a, b, again] = r.data!.submitExecutions.results as { executionId: string; created: boolean }[];
    expect(r.data!.submitExecutions.created).toBe(2);
    expect(b!.executionId).not.toBe(a!.executionId);
    expect(again).toMatchObject({ executionId: a!.executionId, created: false });
    expect((await api().runtime.load(b!.executionId)).snapshot.context.namespace).toBe('team-b');
    const scoped = await gql(api().url, MANY, { inputs: [{ action: 'core.noop', namespace: 'team-a' }, { action: 'core.noop', namespace: 'team-b' }] }, { token: TOKEN_A });
    expect(scoped.errors![0]!.extensions!.code).toBe('FORBIDDEN');
    expect(scoped.errors![0]!.message).toMatch(/^inputs\.1\.namespace: /);
  });
});
