// The size of a value as the JSON a response carries, counted without building the string: a
// response's values are charged before they are built (response-budget.ts), and counting a
// 100 MB value must not cost another 100 MB.

/** Counting stops past this; a thrown sentinel is simpler than threading "done" through the walk. */
class Over extends Error {}

/**
 * The UTF-8 length of JSON.stringify(value) (0 where it gives undefined). Past `stopAbove` it
 * stops counting and returns a number above it.
 */
export function jsonSize(value: unknown, stopAbove = Number.POSITIVE_INFINITY): number {
  let size = 0;
  const add = (n: number) => {
    size += n;
    if (size > stopAbove) throw new Over();
  };
  const visit = (v: unknown, inArray: boolean): void => {
    if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
      v = (v as { toJSON(): unknown }).toJSON();
    }
    switch (typeof v) {
      case 'string':
        return add(stringSize(v, stopAbove - size));
      case 'number':
        return add(Number.isFinite(v) ? String(v).length : 4);
      case 'boolean':
        return add(v ? 4 : 5);
      case 'bigint':
        return add(String(v).length);
      case 'undefined':
      case 'function':
      case 'symbol':
        return add(inArray ? 4 : 0); // null in an array; left out of an object
    }
    if (v === null) return add(4);
    if (Array.isArray(v)) {
      add(2 + Math.max(0, v.length - 1));
      for (const item of v) visit(item, true);
      return;
    }
    add(2);
    let members = 0;
    for (const [key, item] of Object.entries(v as object)) {
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      add((members++ > 0 ? 1 : 0) + stringSize(key, Number.POSITIVE_INFINITY) + 1);
      visit(item, false);
    }
  };
  try {
    visit(value, false);
  } catch (err) {
    if (!(err instanceof Over)) throw err;
  }
  return size;
}

/** A string's length as a JSON string literal in UTF-8, quotes and escapes included. */
function stringSize(s: string, stopAbove: number): number {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) n += c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) n += 2;
    else if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4; // a surrogate pair: one 4-byte character
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) n += 6; // a lone surrogate: JSON.stringify writes \udxxx
    else n += 3;
    if ((i & 0xffff) === 0xffff && n > stopAbove) return n;
  }
  return n;
}
