// Tokens scoped to namespaces (BATON_API_NAMESPACE_TOKENS): `<ns>[,<ns>…]=<token>`, entries
// separated by `;`. Such a token reads and writes in its namespaces only: lists are filtered to
// them, an execution of another namespace is not found (by id, in a subscription, to cancel),
// a submission elsewhere is refused, and whatever the API cannot yet tell apart by namespace
// (workers, action statistics, dead letters, workflows, schedules) is refused as a whole, so a
// token for `a` never sees or touches `b`.
import { ConfigError } from '../errors.ts';
import { namespaceProblem } from '../input/namespace.ts';

export interface NamespaceToken {
  namespaces: readonly string[];
  token: string;
}

const TOKEN = /^[\x21-\x7e]{1,1024}$/;

/** The entries of BATON_API_NAMESPACE_TOKENS, or ConfigError naming the entry (never its token). */
export function parseNamespaceTokens(raw: string | undefined): NamespaceToken[] {
  if (raw === undefined || raw.trim() === '') return [];
  return raw
    .split(';')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '')
    .map((entry, i) => {
      const where = `BATON_API_NAMESPACE_TOKENS: entry ${i + 1}`;
      const eq = entry.indexOf('=');
      if (eq <= 0) throw new ConfigError(`${where}: expected <namespace>[,<namespace>…]=<token>`);
      const namespaces = entry.slice(0, eq).split(',').map((s) => s.trim());
      for (const ns of namespaces) {
        const problem = namespaceProblem(ns);
        if (problem) throw new ConfigError(`${where}: namespace "${ns.slice(0, 80)}" ${problem}`);
      }
      const token = entry.slice(eq + 1).trim();
      if (!TOKEN.test(token)) throw new ConfigError(`${where}: the token must be 1 to 1024 printable ASCII characters without spaces`);
      return { namespaces: [...new Set(namespaces)], token };
    });
}

/** Root fields a scoped token may use; each checks the namespace itself (resolvers.ts, mutations.ts). */
export const SCOPED_ROOT_FIELDS: ReadonlySet<string> = new Set([
  'execution',
  'executions',
  'events',
  'executionMachine',
  'access',
  'submitExecution',
  'submitExecutions',
  'cancelExecution',
  'executionUpdated',
  '__typename',
  '__schema',
  '__type',
]);

/** Whether a caller limited to `scope` (undefined: every namespace) may see `namespace`. */
export const inScope = (scope: readonly string[] | undefined, namespace: string): boolean => scope === undefined || scope.includes(namespace);
