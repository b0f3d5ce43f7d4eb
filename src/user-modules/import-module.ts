// Importing a user's module by its path: `--actions ./actions.ts`, `--against
// ./candidate.machine.ts`. JavaScript always imports. TypeScript needs a loader: when Baton runs
// its sources (bin/baton.js under tsx, or vitest) it is there already; when Baton runs compiled
// (dist/), tsx is registered on the first TypeScript module, together with a hook that sends
// that module's imports of Baton's own sources (`../src/actions/index.ts`) to their compiled
// copies in dist/. Without it a user module would load a second copy of Baton beside the
// compiled one, and an ActionError it throws would not be the worker's ActionError.
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';

const TYPESCRIPT = /\.(ts|mts|cts)$/;
// This file is src/user-modules/import-module.ts, or dist/src/user-modules/import-module.js when compiled.
const COMPILED = import.meta.url.endsWith('.js');

let typescriptLoader: Promise<void> | undefined;

async function registerTypeScriptLoader(): Promise<void> {
  const { register: registerTsx } = await import('tsx/esm/api');
  registerTsx();
  // A .ts file outside any `"type": "module"` package is CommonJS to Node, which loads it through
  // require(): without tsx's CommonJS hook too it was read as plain JavaScript (a type annotation
  // was a syntax error) or failed as "require() of an ES module in a cycle".
  const { register: registerTsxCjs } = await import('tsx/cjs/api');
  registerTsxCjs();
  // Registered after tsx, so it runs first and rewrites what tsx resolved.
  const dist = new URL('../../', import.meta.url);
  register(new URL('./sources-to-dist-hooks.js', import.meta.url), { data: { root: new URL('../', dist).href, dist: dist.href } });
}

/** The module's namespace object; loading errors propagate as they are. */
export async function importUserModule(file: string): Promise<Record<string, unknown>> {
  if (COMPILED && TYPESCRIPT.test(file)) await (typescriptLoader ??= registerTypeScriptLoader());
  return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
}
