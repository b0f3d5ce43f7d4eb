// A workflow's step inputs are checked against their actions' schemas when it is submitted
// (src/workflow/service.ts workflowProblems): a schema whose refinement or transform throws, or
// that is asynchronous, is a problem at the step's input, as at every other door
// (src/actions/registry.ts validateInput), never an exception out of the submission.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction } from '../../src/actions/action.ts';
import { createActionRegistry } from '../../src/actions/registry.ts';
import { workflowProblems } from '../../src/workflow/service.ts';

const registry = createActionRegistry([
  defineAction({
    name: 'wf.throws',
    input: z.object({ s: z.string() }).transform((v) => {
      if (v.s === 'bad') throw new Error('transform blew up');
      return v;
    }),
    run: async () => null,
  }),
  defineAction({ name: 'wf.async', input: z.object({ n: z.number() }).refine(async () => true), run: async () => null }),
]);

describe('workflowProblems with step schemas that throw', () => {
  it('names the step input whose schema threw', () => {
    const r = workflowProblems({ steps: [{ id: 'a', action: 'wf.throws', input: { s: 'bad' } }] }, registry);
    expect(r).toEqual({ ok: false, problems: [{ path: 'steps.0.input', message: 'transform blew up (thrown by a refinement or transform of the action\'s input schema)' }] });
  });

  it('says an asynchronous schema cannot be checked', () => {
    const r = workflowProblems({ steps: [{ id: 'a', action: 'wf.async', input: { n: 1 } }] }, registry);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problems).toEqual([{ path: 'steps.0.input', message: expect.stringMatching(/^cannot be checked: the action's input schema is asynchronous/) }]);
  });
});
