// JSON.parse keeps the last of two equal keys in one object and drops the first without a word,
// so `{"action": "a", "action": "b"}` would run b. Text a person wrote (a `--file` line, an
// `--input`) is scanned for them once it has parsed, and refused naming the key's place. GraphQL
// refuses the same in a query's own object literals ("There can be only one input field").
import type { ValueProblem } from './rules.ts';

/** Where the first repeated key of valid JSON `text` is: the path to its object and the key; undefined when none repeats. */
export function repeatedJsonKey(text: string): { path: (string | number)[]; key: string } | undefined {
  // One frame per open object or array: an object's keys so far, an array's next index.
  const frames: ({ keys: Set<string>; at: string | undefined } | { index: number })[] = [];
  const path: (string | number)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i + 1;
      // The closing quote is the next one after an even number of backslashes. indexOf jumps
      // over a string's text (the GraphQL API scans every request body: a 1 MB string takes
      // 0.01 ms so, 4.5 ms a character at a time).
      for (i = text.indexOf('"', start); i !== -1; i = text.indexOf('"', i + 1)) {
        let b = i - 1;
        while (text.charCodeAt(b) === 0x5c /* \ */) b--;
        if ((i - 1 - b) % 2 === 0) break;
      }
      if (i === -1) return undefined; // unterminated: not valid JSON
      if (!expectKey) continue;
      const raw = text.slice(start, i);
      const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
      const frame = frames.at(-1) as { keys: Set<string>; at: string | undefined };
      if (frame.keys.has(key)) return { path: [...path], key };
      frame.keys.add(key);
      frame.at = key;
      expectKey = false;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = frames.at(-1);
      if (parent) path.push('keys' in parent ? parent.at! : parent.index);
      frames.push(c === 0x7b ? { keys: new Set(), at: undefined } : { index: 0 });
      expectKey = c === 0x7b;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      frames.pop();
      if (frames.length > 0) path.pop();
    } else if (c === 0x2c /* , */) {
      const frame = frames.at(-1)!;
      if ('keys' in frame) expectKey = true;
      else frame.index++;
    }
  }
  return undefined;
}

/** The repeated key as a value problem (its path includes the key), for `under(argument, …)`. */
export function repeatedJsonKeyProblems(text: string): ValueProblem[] {
  const found = repeatedJsonKey(text);
  return found ? [{ path: [...found.path, found.key], message: 'appears twice in one object (JSON would keep only the last): give it once' }] : [];
}
