// An own "__proto__" key (JSON.parse makes one) in a record Baton takes is refused naming it,
// never silently dropped (zod's record assigns keys, and assigning __proto__ sets the prototype):
// a workflow step's inputFrom and http.request's headers, as tags already are.
import { describe, expect, it } from 'vitest';
import { checkWorkflow } from '../../schemas/workflow.ts';
import { createHttpRequestAction } from '../../src/actions/http-request.ts';
import { validateInput } from '../../src/actions/registry.ts';

describe('a "__proto__" key in a record', () => {
  it('is refused in a workflow step\'s inputFrom, naming the place', () => {
    const definition = JSON.parse(
      '{"steps":[{"id":"a","action":"core.noop"},{"id":"b","action":"core.echo","dependsOn":["a"],"inputFrom":{"__proto__":"a.result"}}]}',
    ) as unknown;
    const r = checkWorkflow(definition);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toContainEqual({ path: 'steps.1.inputFrom.__proto__', message: expect.stringMatching(/^"__proto__" cannot be an input key filled from a parent/) });
  });

  it('is refused in http.request\'s headers, naming the place', () => {
    const input = JSON.parse('{"url":"https://example.com/","headers":{"__proto__":"x","accept":"text/plain"}}') as unknown;
    expect(() => validateInput(createHttpRequestAction(), input)).toThrow(/input\.headers\.__proto__: "__proto__" cannot be a header name/);
    expect(() => validateInput(createHttpRequestAction(), { url: 'https://example.com/', headers: { accept: 'text/plain' } })).not.toThrow();
  });
});
