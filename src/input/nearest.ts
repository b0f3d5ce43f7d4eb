// "Did you mean …?": the known name nearest to a mistyped one, for unknown fields of workflow
// definitions and action options, unknown BATON_* variables and unknown actions. Names are
// compared without case, `_`, `-`, `.` and spaces (dependOn ≈ depends_on ≈ dependsOn), by edit
// distance (a swap of neighbours is one edit); `aliases` catch the words people reach for that look nothing like the name
// (`after` for `dependsOn`).

const normalise = (name: string) => name.toLowerCase().replace(/[-_.\s]/g, '');

/** Edit distance where swapping two neighbours is one edit (`nmae` → `name`): optimal string alignment. */
export function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The known name `name` most likely meant, or undefined when none is close: an alias, else the
 * one at the smallest edit distance if that is at most a third of the longer name (at least 1).
 */
export function nearestName(name: string, known: readonly string[], aliases: Readonly<Record<string, string>> = {}): string | undefined {
  const n = normalise(name);
  for (const [alias, target] of Object.entries(aliases)) if (normalise(alias) === n && known.includes(target)) return target;
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const c = normalise(candidate);
    const distance = editDistance(n, c);
    if (distance <= Math.max(1, Math.floor(Math.max(n.length, c.length) / 3)) && (!best || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}

/** `unknown field; did you mean "dependsOn"?`, or the known names when none is close. */
export function unknownNameMessage(what: string, name: string, known: readonly string[], aliases: Readonly<Record<string, string>> = {}): string {
  const near = nearestName(name, known, aliases);
  if (near !== undefined) return `unknown ${what}; did you mean "${near}"?`;
  return known.length > 0 && known.length <= 20 ? `unknown ${what}; known: ${known.join(', ')}` : `unknown ${what}`;
}
