import { describe, expect, it } from 'vitest';
import { gql, useApi } from './api-harness.ts';
const api = useApi();
const deep = (n: number, open: string, close: string, leaf = '1') => open.repeat(n) + leaf + close.repeat(n);
describe('scratch', () => {
  it('shows', async () => {
    const cases: [string, string, Record<string, unknown>][] = [
      ['nul action filter', `query($a:String){ executions(filter:{action:$a}, first:1){ edges{cursor} } }`, { a: 'a\u0000b' }],
      ['nul actionStats', `query($a:String){ actionStats(action:$a){ action } }`, { a: 'a\u0000b' }],
      ['nul input', `mutation($i:JSON){ submitExecution(action:"core.echo", input:$i){ executionId } }`, { i: { a: 'x\u0000' } }],
      ['nul key', `mutation($i:JSON){ submitExecution(action:"core.echo", input:$i){ executionId } }`, { i: { ['x\u0000']: 1 } }],
      ['nul idem', `mutation($k:String){ submitExecution(action:"core.echo", idempotencyKey:$k){ executionId } }`, { k: 'x\u0000' }],
      ['lone surrogate', `mutation($i:JSON){ submitExecution(action:"core.echo", input:$i){ executionId } }`, { i: 'a\uD800b' }],
      ['since year 0', `{ executions(filter:{since:"0000-01-01T00:00:00Z"}, first:1){ edges{cursor} } }`, {}],
      ['deadletter cursor', `query($a:String){ deadLetters(first:1, after:$a){ edges{cursor} } }`, { a: Buffer.from('dead-letter:9999999999999999999').toString('base64url') }],
      ['wf unknown', `mutation($d:JSON!){ submitWorkflow(definition:$d){ workflowId } }`, { d: { steps: [{ id: 'a', action: 'core.noop' }, { id: 'b', action: 'core.noop', after: ['a'], dependOn: ['a'], inputs: {} }, { id: 'c', action: 'core.sleep', dependsOn: ['a', 'zz'], input: { msx: 1 }, inputFrom: { ms: 'a.result' } }] } }],
    ];
    for (const [name, q, v] of cases) {
      const r = await gql(api().url, q, v);
      console.log(name, r.status, JSON.stringify(r.errors?.map((e) => [e.message, e.extensions])));
    }
    for (const [name, body] of [['deep arrays', deep(5000, '[', ']')], ['deep objects', deep(10000, '{"a":', '}')]]) {
      const r = await fetch(api().url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"query":"mutation($i:JSON){ submitExecution(action:\\"core.echo\\", input:$i){ executionId } }","variables":{"i":${body}}}` });
      console.log(name, body.length, r.status, (await r.text()).slice(0, 300));
    }
  });
});
