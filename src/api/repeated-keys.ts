// JSON.parse keeps the last of two equal keys, so `"variables": {"input": {"a": 1, "a": 2}}`
// would submit a = 2 without a word, where the CLI (`--input`, `submit --file`) refuses the
// same text (src/input/duplicate-keys.ts). This plugin reads a JSON request body as text, parses
// it, and scans that text once for a repeated key (about the cost of the parse itself: 4.5 ms
// for a 1 MB bulk submit, microseconds for a usual request); GET's `variables` and `extensions`
// likewise. A repeat is refused as BAD_USER_INPUT (HTTP 400) naming its place in the request
// (`variables.input.a`): the body is refused before its query is read, so that place, not an argument.
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { repeatedJsonKey } from '../input/duplicate-keys.ts';

const MESSAGE = 'appears twice in one object (JSON would keep only the last): give it once';

/** The refusal of a key repeated in `text`, whose place in the request starts with `prefix`; undefined when none repeats. */
function repeatedKeyError(text: string, prefix: readonly string[]): Error | undefined {
  const found = repeatedJsonKey(text);
  if (!found) return undefined;
  const path = [...prefix, ...found.path, found.key].join('.');
  return createGraphQLError(`${path}: ${MESSAGE}`, { extensions: { code: 'BAD_USER_INPUT', problems: [{ path, message: MESSAGE }], http: { status: 400 } } });
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** yoga's own test for the JSON body parser (request-parser/post-json.js). */
function isJsonPost(request: Request): boolean {
  if (request.method !== 'POST') return false;
  const type = request.headers.get('content-type')?.split(',')[0]?.split(';')[0]?.trim();
  return type === 'application/json' || type === 'application/graphql+json';
}

export function useRepeatedKeyRefusal(): Plugin {
  return {
    onRequestParse({ request, url, requestParser, setRequestParser, fetchAPI }) {
      if (request.method === 'GET') {
        for (const name of ['variables', 'extensions']) {
          const text = url.searchParams.get(name);
          // Only valid JSON is scanned: yoga refuses the rest as it always did.
          const refused = text && parses(text) ? repeatedKeyError(text, [name]) : undefined;
          if (refused) throw refused;
        }
        return;
      }
      if (!requestParser || !isJsonPost(request)) return;
      const yogaParser = requestParser;
      setRequestParser(async (req) => {
        // The request yoga's body-size limit wraps (it runs after this plugin): text() fails past it as json() did.
        const text = await req.text();
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        if (body === null || typeof body !== 'object') {
          // Not JSON, or not an object: yoga's parser answers it, with its own short 400.
          return yogaParser(new fetchAPI.Request(req.url, { method: req.method, headers: req.headers, body: text }));
        }
        const refused = repeatedKeyError(text, []);
        if (refused) throw refused;
        return body as ReturnType<typeof yogaParser>;
      });
    },
  };
}
