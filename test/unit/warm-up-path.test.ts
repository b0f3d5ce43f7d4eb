// The in-memory run hosts make before their first execution (warmUpExecutions) stays a path the
// catalog and the machine accept: if either changes so that it is refused, hosts would start cold
// with a warning in their log (src/process/warm-up.ts), so this fails first.
import { describe, expect, it } from 'vitest';
import { statusOf } from '../../actors/execution.machine.ts';
import { warmUpExecutions } from '../../src/runtime/execution-kind.ts';

describe('warm-up path', () => {
  it('runs a made-up execution to Completed through make and decide', () => {
    expect(statusOf(warmUpExecutions(new Date('2026-01-01T00:00:00Z')))).toBe('Completed');
  });
});
