// CLI text output (src/cli/format.ts): stored text is shown, never obeyed by the terminal.
import { describe, expect, it, vi } from 'vitest';
import { fields, printable, table } from '../../src/cli/format.ts';
import { progressLine } from '../../src/cli/progress.ts';

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

describe('progressLine', () => {
  /** A stream that keeps what is written, as a terminal (isTTY) or a log. */
  const sink = (isTTY: boolean) => {
    const lines: string[] = [];
    return { lines, stream: { isTTY, write: (s: string) => lines.push(s) } as unknown as NodeJS.WriteStream };
  };
  const later = () => vi.advanceTimersByTime(6_000);

  it('shows the share of the total, and past it (the source grew meanwhile) no percentage above 100', () => {
    vi.useFakeTimers();
    try {
      const { lines, stream } = sink(false);
      const p = progressLine('copying', 1_000, stream);
      later();
      p.update(500);
      later();
      p.update(1_500);
      expect(lines[0]).toMatch(/^copying: 50% \(500\/1,000\) events, /);
      expect(lines[1]).toMatch(/^copying: 1,500 \(more than the 1,000 counted at the start\) events, /);
      expect(lines.join('')).not.toMatch(/1,500\/1,000|150%/);
    } finally {
      vi.useRealTimers();
    }
  });
});
