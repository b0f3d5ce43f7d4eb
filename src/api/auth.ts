// Bearer tokens. Default deny once any token is configured: every GraphQL request needs a valid
// token, mutations the admin one. With no token at all the API is open, which is only allowed on
// a loopback address (startApiServer refuses anything else: see checkExposure).
import { createHash, timingSafeEqual } from 'node:crypto';
import { getOperationAST, Kind, type DocumentNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { ConfigError } from '../errors.ts';
import { codedError } from './errors.ts';
import { parseNamespaceTokens, SCOPED_ROOT_FIELDS } from './namespace-tokens.ts';

/** What a request may do: `admin` reads and writes, `read` only reads. */
export type Role = 'admin' | 'read';

export interface TokenOptions {
  adminToken?: string | undefined;
  readToken?: string | undefined;
  /** BATON_API_NAMESPACE_TOKENS: admin tokens limited to namespaces (namespace-tokens.ts). */
  namespaceTokens?: string | undefined;
}

export interface ApiAuth {
  /** False when no token is configured: every request is admin. */
  readonly required: boolean;
  /** The request's role, or undefined when a token is required and it brought no valid one. */
  roleOf(request: Request): Role | undefined;
  /** The same, from the Authorization header's value. */
  roleOfAuthorization(header: string | undefined): Role | undefined;
  /** The namespaces the request's token is limited to; undefined: every namespace. */
  namespacesOf(request: Request): readonly string[] | undefined;
}

interface Principal {
  role: Role;
  namespaces?: readonly string[];
}

// Digests first: timingSafeEqual needs equal lengths, and comparing fixed-size digests hides
// the token's length as well as its content.
const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

export function createApiAuth(o: TokenOptions): ApiAuth {
  const admin = o.adminToken ? digest(o.adminToken) : undefined;
  const read = o.readToken ? digest(o.readToken) : undefined;
  const scoped = parseNamespaceTokens(o.namespaceTokens).map((t) => ({ namespaces: t.namespaces, digest: digest(t.token) }));
  const required = admin !== undefined || read !== undefined || scoped.length > 0;
  const principals = new WeakMap<Request, Principal | undefined>();
  function principal(authorization: string | undefined): Principal | undefined {
    if (!required) return { role: 'admin' };
    const token = BEARER.exec(authorization ?? '')?.[1];
    if (token === undefined) return undefined;
    const given = digest(token);
    // Compare against every token, always, so the time taken does not tell which one matched.
    const isAdmin = admin !== undefined && timingSafeEqual(given, admin);
    const isRead = read !== undefined && timingSafeEqual(given, read);
    const scopes = scoped.filter((t) => timingSafeEqual(given, t.digest));
    if (isAdmin) return { role: 'admin' };
    if (isRead) return { role: 'read' };
    return scopes[0] && { role: 'admin', namespaces: scopes[0].namespaces };
  }
  const of = (request: Request) => {
    if (!principals.has(request)) principals.set(request, principal(request.headers.get('authorization') ?? undefined));
    return principals.get(request);
  };
  return {
    required,
    roleOf: (request) => of(request)?.role,
    roleOfAuthorization: (header) => principal(header)?.role,
    namespacesOf: (request) => of(request)?.namespaces,
  };
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|\[::1\]|localhost)$/i;
export const isLoopback = (host: string) => LOOPBACK.test(host);

/** Refuse configurations that would expose the API without protection or with an ambiguous token. */
export function checkExposure(o: TokenOptions & { host: string }): void {
  if (!o.adminToken && !o.readToken && !o.namespaceTokens && !isLoopback(o.host)) {
    throw new ConfigError(
      `BATON_API_HOST: the API would listen on ${o.host} with no token; set BATON_API_TOKEN (and optionally ` +
        'BATON_API_READ_TOKEN) to require one, or listen on 127.0.0.1',
    );
  }
  if (o.adminToken && o.readToken && o.adminToken === o.readToken) {
    throw new ConfigError('BATON_API_READ_TOKEN: must differ from BATON_API_TOKEN, or read-only clients could run mutations');
  }
  const tokens = [o.adminToken, o.readToken, ...parseNamespaceTokens(o.namespaceTokens).map((t) => t.token)].filter((t) => t);
  if (new Set(tokens).size < tokens.length) {
    throw new ConfigError('BATON_API_NAMESPACE_TOKENS: each token must differ from the others and from BATON_API_TOKEN and BATON_API_READ_TOKEN');
  }
}

/**
 * The root fields a selection asks for, through its fragments (`... on Query { … }`, `...F`) as
 * code generators write them. The document was validated: every spread names a fragment, and
 * none spreads itself.
 */
function rootFields(selectionSet: SelectionSetNode, document: DocumentNode): string[] {
  return selectionSet.selections.flatMap((s) => {
    if (s.kind === Kind.FIELD) return [s.name.value];
    if (s.kind === Kind.INLINE_FRAGMENT) return rootFields(s.selectionSet, document);
    const fragment = document.definitions.find((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION && d.name.value === s.name.value);
    return fragment ? rootFields(fragment.selectionSet, document) : [`...${s.name.value}`];
  });
}

/**
 * Checks the token before the request is even parsed (401), and the role before a mutation
 * runs (403). A subscription is a read.
 */
export function useTokenAuth(auth: ApiAuth): Plugin {
  return {
    onRequestParse({ request }) {
      if (auth.roleOf(request) === undefined) {
        throw codedError('UNAUTHENTICATED', 'a valid token is required: send "Authorization: Bearer <token>"', {
          http: { status: 401, headers: { 'www-authenticate': 'Bearer' } },
        });
      }
    },
    onExecute({ args, setResultAndStopExecution }) {
      const operation = getOperationAST(args.document, args.operationName ?? undefined);
      const request = (args.contextValue as { request?: Request }).request;
      if (operation?.operation === 'mutation' && (!request || auth.roleOf(request) !== 'admin')) {
        setResultAndStopExecution({
          errors: [codedError('FORBIDDEN', 'mutations need the admin token (BATON_API_TOKEN); this token may only read')],
        });
        return;
      }
      const scope = request && auth.namespacesOf(request);
      if (scope === undefined || !operation) return;
      // A namespace-scoped token: only the fields that check namespaces (namespace-tokens.ts).
      const refused = [...new Set(rootFields(operation.selectionSet, args.document))].filter((name) => !SCOPED_ROOT_FIELDS.has(name));
      if (refused.length > 0) {
        setResultAndStopExecution({
          errors: [codedError('FORBIDDEN', `this token is limited to namespaces ${scope.join(', ')}: ${refused.join(', ')} is not available to it (only ${[...SCOPED_ROOT_FIELDS].filter((f) => !f.startsWith('__')).join(', ')})`)],
        });
      }
    },
  };
}
