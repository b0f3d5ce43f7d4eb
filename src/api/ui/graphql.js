// The page's GraphQL client: JSON POSTs to this API with the CSRF header it requires, and the
// bearer token the user typed, if any (kept for the tab only, in sessionStorage).
const ENDPOINT = '/graphql'; // GRAPHQL_PATH in src/api/server.ts
const CSRF_HEADER = 'x-graphql-yoga-csrf'; // CSRF_HEADER in src/api/server.ts
const TOKEN_KEY = 'baton.apiToken';

/** The API refused the request for want of a (valid) token: 401. */
export class TokenRequired extends Error {}

/** The token is valid but may not do this (a mutation with the read-only token): 403. */
export class Forbidden extends Error {}

export const savedToken = () => sessionStorage.getItem(TOKEN_KEY) ?? '';

/** @param {string} token an empty token forgets the saved one */
export function saveToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/**
 * Run one operation and return its data; GraphQL errors become one Error naming them all.
 * @param {string} query
 * @param {Record<string, unknown>} [variables]
 */
export async function graphql(query, variables = {}) {
  const token = savedToken();
  const response = await fetch(ENDPOINT, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      [CSRF_HEADER]: '1',
      ...(token && { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({ query, variables }),
  });
  if (response.status === 401) throw new TokenRequired(token ? 'the API refused this token' : 'the API needs a token');
  let body;
  try {
    body = await response.json();
  } catch {
    if (response.status === 403) throw new TokenRequired('the API refused this token');
    throw new Error(`the API answered ${response.status} ${response.statusText}`);
  }
  const message = body.errors?.map((e) => e.message).join('; ');
  if (response.status === 403 || body.errors?.some((e) => e.extensions?.code === 'FORBIDDEN')) throw new Forbidden(message || 'this token may not do that');
  if (body.errors?.length) throw new Error(message);
  return body.data;
}
