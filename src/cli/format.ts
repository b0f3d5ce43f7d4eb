// Output helpers shared by CLI commands: JSON that survives bigints, and plain text tables.

export function toJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString()) : v), 2);
}

// Control characters other than newline and tab (ESC, CR, backspace, C1), as \u escapes: stored text
// (a cancel reason, an error message, a tag) must not move the cursor or rewrite what a terminal
// already shows, as `printf '\033[2K\rFORGED: Completed'` in a reason did.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` with its terminal control characters shown as `\u001b` and the like. */
export const printable = (text: string): string => text.replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** A left-aligned text table; the last column is not padded. */
export function table(headers: string[], cells: string[][]): string {
  const rows = cells.map((r) => r.map(printable));
  // A loop, not Math.max(...rows): one argument per row overflowed the stack at ~120,000 rows (a day of progress events).
  const widths = headers.map((h, i) => rows.reduce((most, r) => Math.max(most, (r[i] ?? '').length), h.length));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(headers), ...rows.map(line)].join('\n');
}

/** "key  value" lines with aligned values. */
export function fields(entries: [string, string | undefined | null][]): string {
  const shown = entries.filter((e): e is [string, string] => e[1] !== undefined && e[1] !== null).map(([k, v]): [string, string] => [k, printable(v)]);
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}
