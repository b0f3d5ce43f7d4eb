import { describe, expect, it } from 'vitest';
import { repeatedJsonKey } from '../../src/input/duplicate-keys.ts';

describe('repeatedJsonKey', () => {
  it('finds a key given twice in one object, at any depth, with its place', () => {
    expect(repeatedJsonKey('{"action":"a","action":"b"}')).toEqual({ path: [], key: 'action' });
    expect(repeatedJsonKey('{"action":"a","input":{"list":[1,{"x":1,"y":{},"x":2}]}}')).toEqual({ path: ['input', 'list', 1], key: 'x' });
    // Escapes are read as JSON reads them: "\u0061" is "a".
    expect(repeatedJsonKey('{"a":1,"\\u0061":2}')).toEqual({ path: [], key: 'a' });
  });

  it('passes what only looks alike: equal keys in different objects, keys inside strings, escaped quotes', () => {
    for (const text of [
      '{"a":{"a":1},"b":[{"a":1},{"a":2}]}',
      '{"a":"{\\"a\\":1,\\"a\\":2}","b":"\\\\"}',
      '{"a\\"":1,"a":2}',
      '[1,"x",{"k":[]},{"k":{}}]',
      '"just a string"',
      '{}',
    ]) expect(repeatedJsonKey(text), text).toBeUndefined();
  });
});
