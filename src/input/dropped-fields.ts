// The catalog's schemas (zod objects) keep only the fields they know and drop the rest without a
// word. Where a person or a file gave the value, what was dropped is named and refused instead.

/** The paths (`data.retryabel`) of what `given` holds and the parsed `kept` dropped. */
export function droppedFields(given: unknown, kept: unknown, path: string): string[] {
  if (given === null || typeof given !== 'object' || kept === null || typeof kept !== 'object') return [];
  if (Array.isArray(given)) return Array.isArray(kept) ? given.flatMap((g, i) => droppedFields(g, kept[i], `${path}.${i}`)) : [];
  return Object.entries(given).flatMap(([k, g]) => (Object.hasOwn(kept, k) ? droppedFields(g, (kept as Record<string, unknown>)[k], `${path}.${k}`) : [`${path}.${k}`]));
}
