// Output helpers shared by CLI commands: JSON that survives bigints, and plain text tables.

export function toJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString()) : v), 2);
}

/** A left-aligned text table; the last column is not padded. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(headers), ...rows.map(line)].join('\n');
}

/** "key  value" lines with aligned values. */
export function fields(entries: [string, string | undefined | null][]): string {
  const shown = entries.filter((e): e is [string, string] => e[1] !== undefined && e[1] !== null);
  const width = Math.max(...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}
