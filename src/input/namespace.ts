// Namespaces: every execution, workflow and schedule lives in one. A name is a DNS label
// (lower-case letters, digits and '-', 1 to 63 characters, starting and ending with a letter or
// digit), so it fits a URL, a Prometheus label, a stream id and a token scope alike. Pure: the
// event catalog, the CLI, the API and the library all check with these.

/** The namespace of whatever names none (and of every execution recorded before namespaces). */
export const DEFAULT_NAMESPACE = 'default';
export const NAMESPACE_MAX_LENGTH = 63;
export const NAMESPACE_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
export const NAMESPACE_RULE = 'must be 1 to 63 lower-case letters, digits or -, starting and ending with a letter or digit';

/** Why `value` is not a namespace name, or undefined when it is one. */
export function namespaceProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  if (value.length > NAMESPACE_MAX_LENGTH) return `must be at most ${NAMESPACE_MAX_LENGTH} characters (got ${value.length})`;
  if (!NAMESPACE_PATTERN.test(value)) return NAMESPACE_RULE;
  return undefined;
}

/** `a,b, c` as a list of names, or the first problem (naming the entry). Duplicates are dropped. */
export function parseNamespaceList(text: string): { ok: true; names: string[] } | { ok: false; problem: string } {
  const names = text.split(',').map((s) => s.trim());
  for (const name of names) {
    const problem = namespaceProblem(name);
    if (problem) return { ok: false, problem: `"${name.slice(0, 80)}" ${problem}` };
  }
  return { ok: true, names: [...new Set(names)] };
}

/** The namespace of a recorded execution, workflow or schedule: absent (recorded before namespaces) means the default. */
export const namespaceOr = (recorded: string | undefined): string => recorded ?? DEFAULT_NAMESPACE;
