// CLI text output (src/cli/format.ts): stored text is shown, never obeyed by the terminal.
import { describe, expect, it } from 'vitest';
import { fields, printable, table } from '../../src/cli/format.ts';

describe('CLI text output', () => {
  it('shows terminal control characters in stored text as \\u escapes, keeping newlines, tabs and other text', () => {
    const forged = 'ok\u001b[2K\rFORGED: Completed';
    expect(printable(forged)).toBe('ok\\u001b[2K\\u000dFORGED: Completed');
    expect(printable('a\tb\nc é ✓ \u0085 \u007f \u0000')).toBe('a\tb\nc é ✓ \\u0085 \\u007f \\u0000');
    expect(fields([['reason', forged]])).toBe('reason  ok\\u001b[2K\\u000dFORGED: Completed');
    expect(table(['ID', 'REASON'], [['x', forged]])).toBe('ID  REASON\nx   ok\\u001b[2K\\u000dFORGED: Completed');
  });

  it('tables a history of 300,000 events (a day of progress), its widths from every row', () => {
    const rows = Array.from({ length: 300_000 }, (_, i) => [String(i), 'ExecutionProgressed']);
    const text = table(['#', 'EVENT'], rows);
    expect(text.split('\n')).toHaveLength(300_001);
    expect(text.split('\n')[1]).toBe('0       ExecutionProgressed');
  });
});
