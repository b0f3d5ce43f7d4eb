// `baton worker --actions ./actions.js`: load a user's module of actions.
//
//   // actions.ts
//   export const actions = [resize, notify];        // or: export default [resize, notify];
//                                                    // or: export default resize;
import fs from 'node:fs/promises';
import path from 'node:path';
import { BatonError } from '../errors.ts';
import { importUserModule } from '../user-modules/import-module.ts';
import { isActionDefinition, type AnyActionDefinition } from './action.ts';
import { describeImportFailure } from './import-failure.ts';

/** The module is missing, failed to import, or exports no actions; the message says which and why. */
export class ActionsModuleError extends BatonError {
  constructor(
    readonly modulePath: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface LoadActionsOptions {
  /** What a relative path is resolved against. Default process.cwd(). */
  cwd?: string;
}

/**
 * Imports `modulePath` (relative to cwd) and returns its actions: the `actions` export when
 * there is one, else the default export; either an action (defineAction) or an array of
 * them. `.js` and `.mjs` always work; so does `.ts` (src/user-modules/import-module.ts).
 */
export async function loadActionsModule(modulePath: string, options: LoadActionsOptions = {}): Promise<AnyActionDefinition[]> {
  const cwd = options.cwd ?? process.cwd();
  const file = path.resolve(cwd, modulePath);
  const stat = await fs.stat(file).catch(() => undefined);
  if (!stat) {
    throw new ActionsModuleError(file, `actions module not found: ${file} ("${modulePath}" resolved against ${cwd})`);
  }
  if (!stat.isFile()) throw new ActionsModuleError(file, `actions module ${file} is not a file`);

  let mod: Record<string, unknown>;
  try {
    mod = await importUserModule(file);
  } catch (err) {
    const code = (err as { code?: unknown } | null | undefined)?.code; // anything may be thrown, undefined too
    const hint =
      code === 'ERR_UNKNOWN_FILE_EXTENSION'
        ? ' (Baton imports .js, .mjs, .ts, .mts and .cts modules; compile others to .js)'
        : '';
    throw new ActionsModuleError(file, `actions module ${file} failed to load${hint}: ${await describeImportFailure(err, file)}`, {
      cause: err,
    });
  }

  mod = ownExports(mod);
  const [exportName, value] = pick(mod);
  const fail = (why: string) =>
    new ActionsModuleError(
      file,
      `actions module ${file} exports no usable actions: ${why}. Export \`actions\` (or a default export) ` +
        `holding an action built with defineAction() or an array of them; the module exports ${describeExports(mod)}`,
    );
  if (exportName === undefined) throw fail('it has neither an `actions` nor a default export');
  if (isActionDefinition(value)) return [value];
  if (!Array.isArray(value)) throw fail(`\`${exportName}\` is ${describe(value)}`);
  if (value.length === 0) throw fail(`\`${exportName}\` is an empty array`);
  const bad = value.findIndex((v) => !isActionDefinition(v));
  if (bad !== -1) throw fail(`\`${exportName}[${bad}]\` is ${describe(value[bad])}, not an action`);
  return value as AnyActionDefinition[];
}

/**
 * The exports the user wrote. A module loaded as CommonJS (a .ts or .js file with no "type":
 * "module" beside it, a .cjs) arrives as `{ default: module.exports }`, so `export default [a]`
 * read as `default.default` and `export const actions` as `default.actions`, and a refusal named
 * a `default` export nobody wrote.
 */
function ownExports(mod: Record<string, unknown>): Record<string, unknown> {
  const d = mod.default;
  const onlyDefault = Object.keys(mod).every((k) => k === 'default' || k === 'module.exports' || (d !== null && typeof d === 'object' && k in d));
  if (!onlyDefault || d === null || typeof d !== 'object' || Array.isArray(d) || isActionDefinition(d)) return mod;
  return d as Record<string, unknown>;
}

function pick(mod: Record<string, unknown>): [string | undefined, unknown] {
  if (mod.actions !== undefined) return ['actions', mod.actions];
  if (mod.default === undefined) return [undefined, undefined];
  // A CommonJS module imported from ESM: `default` is module.exports, which may hold `actions`.
  const d = mod.default as { actions?: unknown } | null;
  if (d !== null && typeof d === 'object' && !Array.isArray(d) && !isActionDefinition(d) && d.actions !== undefined) {
    return ['default.actions', d.actions];
  }
  return ['default', mod.default];
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'function') return `a function${value.name ? ` (${value.name})` : ''}`;
  if (typeof value === 'object') {
    const keys = Object.keys(value);
    return `an object${keys.length ? ` with keys ${keys.slice(0, 8).join(', ')}` : ''}`;
  }
  return `a ${typeof value}`;
}

function describeExports(mod: Record<string, unknown>): string {
  const names = Object.keys(mod);
  if (names.length === 0) return 'nothing';
  return names.map((n) => `${n} (${describe(mod[n])})`).join(', ');
}
