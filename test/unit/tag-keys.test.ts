// The one tag rule refuses the key `__proto__` (every object built from the tags by assignment,
// zod's record among them, dropped it silently), and only that: keys named like other
// Object.prototype members are kept as given, and so is `__proto__` inside an input (JSON).
import { describe, expect, it } from 'vitest';
import { ExecutionRequested, Tags } from '../../schemas/events.ts';
import { parseTagText, tagKeyProblem, tagsProblems } from '../../src/input/tags.ts';

const REFUSAL = 'tag key "__proto__" is reserved: JavaScript reads it as an object\'s prototype, not as a key; choose another name';

describe('tag key __proto__', () => {
  it('is refused by the rule every door uses, naming the key', () => {
    expect(tagKeyProblem('__proto__')).toBe(REFUSAL);
    expect(tagsProblems(JSON.parse('{"__proto__": "x", "a": "b"}'))).toEqual([{ path: ['__proto__'], message: REFUSAL }]);
    expect(parseTagText('__proto__=x')).toEqual({ problem: REFUSAL });
    const r = Tags.safeParse(JSON.parse('{"__proto__": "x", "a": "b"}'));
    expect(r.success).toBe(false);
    expect(r.error!.issues).toMatchObject([{ path: ['__proto__'], message: REFUSAL }]);
  });

  it('keeps constructor, prototype and toString as tag keys, and __proto__ inside an input', () => {
    const tags = { constructor: 'c', prototype: 'p', toString: 't', hasOwnProperty: 'h' };
    expect(tagsProblems(tags)).toEqual([]);
    expect(Tags.parse(tags)).toEqual(tags);
    const input = JSON.parse('{"__proto__": {"polluted": 1}, "nested": {"__proto__": "y"}}');
    const event = ExecutionRequested.parse({ type: 'ExecutionRequested', data: { action: 'core.echo', input, maxAttempts: 1 }, metadata: { by: 'executor', occurredAt: new Date().toISOString() } });
    expect(JSON.stringify(event.data.input)).toBe('{"__proto__":{"polluted":1},"nested":{"__proto__":"y"}}');
  });
});
