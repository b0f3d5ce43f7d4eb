// Bearer tokens. Default deny once any token is configured: every GraphQL request needs a valid
// token, mutations the admin one. With no token at all the API is open, which is only allowed on
// a loopback address (startApiServer refuses anything else: see checkExposure).
import { createHash, timingSafeEqual } from 'node:crypto';
import { getOperationAST } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { ConfigError } from '../errors.ts';
import { codedError } from './errors.ts';

/** What a request may do: `admin` reads and writes, `read` only reads. */
export type Role = 'admin' | 'read';

export interface TokenOptions {
  adminToken?: string | undefined;
  readToken?: string | undefined;
}

export interface ApiAuth {
  /** False when no token is configured: every request is admin. */
  readonly required: boolean;
  /** The request's role, or undefined when a token is required and it brought no valid one. */
  roleOf(request: Request): Role | undefined;
  /** The same, from the Authorization header's value. */
  roleOfAuthorization(header: string | undefined): Role | undefined;
}

// Digests first: timingSafeEqual needs equal lengths, and comparing fixed-size digests hides
// the token's length as well as its content.
const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

export function createApiAuth(o: TokenOptions): ApiAuth {
  const admin = o.adminToken ? digest(o.adminToken) : undefined;
  const read = o.readToken ? digest(o.readToken) : undefined;
  const required = admin !== undefined || read !== undefined;
  const roles = new WeakMap<Request, Role | undefined>();
  function resolve(authorization: string | undefined): Role | undefined {
    if (!required) return 'admin';
    const token = BEARER.exec(authorization ?? '')?.[1];
    if (token === undefined) return undefined;
    const given = digest(token);
    // Compare against both, always, so the time taken does not tell which one matched.
    const isAdmin = admin !== undefined && timingSafeEqual(given, admin);
    const isRead = read !== undefined && timingSafeEqual(given, read);
    return isAdmin ? 'admin' : isRead ? 'read' : undefined;
  }
  return {
    required,
    roleOf(request) {
      if (!roles.has(request)) roles.set(request, resolve(request.headers.get('authorization') ?? undefined));
      return roles.get(request);
    },
    roleOfAuthorization: resolve,
  };
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|\[::1\]|localhost)$/i;
export const isLoopback = (host: string) => LOOPBACK.test(host);

/** Refuse configurations that would expose the API without protection or with an ambiguous token. */
export function checkExposure(o: TokenOptions & { host: string }): void {
  if (!o.adminToken && !o.readToken && !isLoopback(o.host)) {
    throw new ConfigError(
      `BATON_API_HOST: the API would listen on ${o.host} with no token; set BATON_API_TOKEN (and optionally ` +
        'BATON_API_READ_TOKEN) to require one, or listen on 127.0.0.1',
    );
  }
  if (o.adminToken && o.readToken && o.adminToken === o.readToken) {
    throw new ConfigError('BATON_API_READ_TOKEN: must differ from BATON_API_TOKEN, or read-only clients could run mutations');
  }
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
      }
    },
  };
}
