import { describe, expect, it } from 'vitest';
import { repeatedJsonKey } from '../../src/input/duplicate-keys.ts';

describe('repeatedJsonKey', () => {
  it('finds a key given twice in one object, at any depth, with its place', () => {
    expect(repeatedJsonKey('{"action":"a","action":"b"}')).toEqual({ path: [], key: 'action' });
    expect(repeatedJsonKey('{"action":"a","input":{"list":[1,{"x":1,"y":{},"x":2}]}}')).toEqual({ path: ['input', 'list', 1], key: 'x' });
    // Escapes are read as JSON reads them: "\u0061" is "a".
    expect(repeatedJsonKey('{"a":1,"\\u0061":2}')).toEqual({ path: [], key: 'a' });
    // A string ending in backslashes ends at the quote after an even number of them.
    expect(repeatedJsonKey('{"s":"\\\\","a\\\\":1,"t":"x\\"\\\\","a\\\\":2}')).toEqual({ path: [], key: 'a\\' });
    expect(repeatedJsonKey(JSON.stringify({ long: 'x'.repeat(100_000), v: { k: 1 } }).replace('"k":1', '"k":1,"k":2'))).toEqual({ path: ['v'], key: 'k' });
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
