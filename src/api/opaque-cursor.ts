// Cursors of lists keyed by one position (dead letters, workflows, schedules): `<kind>:<position>`
// in base64url, so clients treat them as opaque, and a cursor of another list or one made up is
// told apart. The encoding alone, with no GraphQL in it, so the CLI pages with the same cursors
// without loading the API; each list checks the position itself.

const BASE64URL = /^[A-Za-z0-9_-]+$/;

export const encodePrefixedCursor = (prefix: string, position: string): string => Buffer.from(`${prefix}${position}`).toString('base64url');

/** The position of a cursor encodePrefixedCursor made with `prefix`, or undefined for anything else. */
export function parsePrefixedCursor(prefix: string, value: string, maxLength: number): string | undefined {
  if (value.length > maxLength || !BASE64URL.test(value)) return undefined;
  const text = Buffer.from(value, 'base64url').toString('utf8');
  return text.startsWith(prefix) ? text.slice(prefix.length) : undefined;
}
