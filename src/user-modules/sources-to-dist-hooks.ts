// Module hooks (node:module register) for a user's TypeScript module loaded while Baton runs
// compiled (import-module.ts): an import that resolves to one of Baton's TypeScript sources is
// sent to its compiled copy in dist/, so the process holds one copy of each Baton module.
import { existsSync } from 'node:fs';
import type { ResolveHook } from 'node:module';
import { fileURLToPath } from 'node:url';

let root = '';
let dist = '';

export function initialize(data: { root: string; dist: string }): void {
  root = data.root;
  dist = data.dist;
}

export const resolve: ResolveHook = async (specifier, context, nextResolve) => {
  const resolved = await nextResolve(specifier, context);
  const { url } = resolved;
  if (!url.startsWith(root) || url.startsWith(dist) || !url.endsWith('.ts')) return resolved;
  const compiled = `${dist}${url.slice(root.length, -'.ts'.length)}.js`;
  // Only what was compiled (src, actors, projections, schemas); the user's own files stay with tsx.
  if (!existsSync(fileURLToPath(compiled))) return resolved;
  return { url: compiled, format: 'module', shortCircuit: true };
};
