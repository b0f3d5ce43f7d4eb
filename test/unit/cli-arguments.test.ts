// The CLI's id and path parsers (src/cli/arguments.ts): they take every id the other front doors
// take (src/ids.ts's UUID: any version and variant, either case, or the stream id) and refuse an
// empty path, as they say.
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { executionId, executionIdOrPointer, integerOption, pathOption } from '../../src/cli/arguments.ts';
import { UUID } from '../../src/ids.ts';

describe('executionId', () => {
  it('takes every uuid the other front doors take, in lower case', () => {
    for (const id of ['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000000', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', '01a22d31-42ce-7f21-915f-5a76758bc323']) {
      expect(UUID.test(id)).toBe(true);
      expect(executionId(id)).toBe(id.toLowerCase());
      expect(executionIdOrPointer('workflow status')(id)).toBe(id.toLowerCase());
      expect(executionId(`execution-${id}`)).toBe(id.toLowerCase());
    }
  });

  it('refuses what is no uuid, and points a workflow id to its command', () => {
    expect(() => executionId('0000-0001')).toThrow(/execution id must be a uuid, got "0000-0001"/);
    expect(() => executionIdOrPointer('workflow status')('nightly-1')).toThrow(/for a workflow, run `baton workflow status nightly-1`/);
  });
});

describe('pathOption', () => {
  it("refuses an empty path (it would mean the working directory), a NUL byte and a huge one", () => {
    for (const bad of ['', '  ', 'a\0b', 'x'.repeat(4097)]) expect(() => pathOption('file')(bad)).toThrow(InvalidArgumentError);
    expect(() => pathOption('file')('')).toThrow('must be a file path (no NUL bytes, at most 4096 characters)');
    expect(pathOption('directory')('./archive')).toBe('./archive');
  });
});

describe('integerOption', () => {
  it('says a number past 2^53 is too large, not that it is no whole number', () => {
    const maxAttempts = integerOption('--max-attempts');
    expect(maxAttempts(' 42 ')).toBe(42);
    expect(() => maxAttempts('99999999999999999999')).toThrow(/--max-attempts: is far too large \(99999999999999999999\)/);
    expect(() => maxAttempts('2.5')).toThrow(/must be a whole number, got "2\.5"/);
  });
});
