// The configuration of a client or embedded worker: the environment as the CLI has it, with the
// caller's options in place of the variables they stand for (`databaseUrl` for
// BATON_DATABASE_URL). An option is checked by its variable's own rule (src/config.ts), but
// refused as the option: `options.databaseUrl: Invalid url: …` is InvalidInputError, where
// loadConfig would blame BATON_DATABASE_URL, which the caller never set. A database that cannot
// be reached is blamed on the option too (src/db/connect.ts).
import { loadConfig, type Config, type ConfigDefaults } from '../config.ts';
import { ConfigError } from '../errors.ts';
import { InvalidInputError, type InputProblem } from '../input/errors.ts';
import { textProblem } from '../input/rules.ts';

/** An option standing for an environment variable; `value` undefined: not given (the variable, if set, applies). */
export interface SettingOption {
  /** How the caller named it: `options.databaseUrl`. */
  path: string;
  variable: string;
  value: string | undefined;
}

/** Why `value` is not acceptable as `variable`, by the rule loadConfig checks it with. */
function settingProblem(variable: string, value: string): string | undefined {
  // The environment reads blank as unset: the embedded Postgres instead of the database asked for.
  if (value.trim() === '') return 'must not be empty';
  // NUL and lone surrogates would reach the driver as part of a name (Postgres ends one at a NUL:
  // another database). The environment cannot hold a NUL, so loadConfig never sees one.
  const text = textProblem(value);
  if (text) return text;
  try {
    loadConfig({ [variable]: value });
    return undefined;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.message.replace(`invalid configuration: ${variable}: `, '');
  }
}

/** The Config, or InvalidInputError naming each bad option, before anything is opened. */
export function configWithOptions(options: readonly SettingOption[], defaults: ConfigDefaults): Config {
  const given = options.filter((o): o is SettingOption & { value: string } => o.value !== undefined);
  const problems: InputProblem[] = given.flatMap((o) => {
    const message = settingProblem(o.variable, o.value);
    return message ? [{ path: o.path, message }] : [];
  });
  if (problems.length > 0) throw new InvalidInputError(problems);
  const config = loadConfig({ ...process.env, ...Object.fromEntries(given.map((o) => [o.variable, o.value])) }, process.cwd(), defaults);
  const url = given.find((o) => o.variable === 'BATON_DATABASE_URL');
  return url ? { ...config, databaseUrlOption: url.path } : config;
}
