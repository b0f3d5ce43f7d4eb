// A value option given twice (`baton list --status Completed --status Failed`) is refused, naming
// it: commander keeps the last without a word, so the first was silently dropped. Options built to
// collect several values (`--tag`, `--event`) are marked with repeatable() where they are defined;
// variadic options (`<x...>`) and flags (`--json` twice means the same) are left alone.
import type { EventEmitter } from 'node:events';
import type { Command, Option } from 'commander';
import { BatonError } from '../errors.ts';

const REPEATABLE = Symbol('baton.repeatable-option');

/** Mark an option's parser as one that collects every value given (it receives the previous ones). */
export function repeatable<F extends (...args: never[]) => unknown>(parse: F): F {
  return Object.assign(parse, { [REPEATABLE]: true });
}

const isRepeatable = (option: Option) => option.variadic || (option.parseArg !== undefined && REPEATABLE in option.parseArg);

/** A value as the refusal quotes it: short, and a URL's password left out (`--from` takes one). */
function shown(value: string): string {
  const text = value.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#@]*@/i, '$1***@');
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

/** Refuse a second value of any single-valued option, on `command` and every command under it. */
export function refuseRepeatedOptions(command: Command): void {
  for (const option of command.options) {
    // A flag takes no value (`--json`); `--no-x` neither.
    if (!(option.required || option.optional) || isRepeatable(option)) continue;
    const given: string[] = [];
    // Before commander's own listener: the second value is refused before it is parsed or kept.
    // (A Command is an EventEmitter; commander's types leave that out.)
    (command as unknown as EventEmitter).prependListener(`option:${option.name()}`, (value: string | undefined) => {
      given.push(value ?? '');
      if (given.length > 1) {
        const name = option.long ?? option.short ?? option.flags;
        throw new BatonError(`${name} given twice (${given.map(shown).join(', ')}): give it once`);
      }
    });
  }
  for (const sub of command.commands) refuseRepeatedOptions(sub);
}
