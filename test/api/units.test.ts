// The API's pure parts: outage detection and error masking, cursors, token checks.
import { GraphQLError } from 'graphql';
import { describe, expect, it } from 'vitest';
import { createApiAuth, isLoopback } from '../../src/api/auth.ts';
import { decodeCursor, encodeCursor } from '../../src/api/cursor.ts';
import { badInput, isDatabaseUnavailable, maskApiError } from '../../src/api/errors.ts';
import { IdempotencyKeyConflictError } from '../../src/errors.ts';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('knows connection failures, shutdowns and resource exhaustion', () => {
    for (const code of ['08006', '08001', '57P01', '57P03', '53300', '53100']) expect(isDatabaseUnavailable(pgError(code)), code).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new AggregateError([pgError('ECONNREFUSED')]), {}))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('wrapped', { cause: pgError('57P01') }))).toBe(true);
  });

  it('does not mistake query errors for an outage', () => {
    for (const code of ['42P01', '23505', '22P02', '40001', 'ENOENT']) expect(isDatabaseUnavailable(pgError(code)), code).toBe(false);
    expect(isDatabaseUnavailable(new Error('boom'))).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
  });
});

describe('maskApiError', () => {
  const located = (originalError: Error) => new GraphQLError(originalError.message, { originalError, path: ['executions'] });

  it('turns an outage into SERVICE_UNAVAILABLE with HTTP 503, keeping the path', () => {
    const masked = maskApiError(located(pgError('57P01', 'terminating connection due to administrator command')), 'Unexpected error.') as GraphQLError;
    expect(masked.message).toBe('the database is unavailable; try again shortly');
    expect(masked.extensions).toMatchObject({ code: 'SERVICE_UNAVAILABLE', http: { status: 503 } });
    expect(masked.path).toEqual(['executions']);
  });

  it('gives Baton errors their codes and masks everything else', () => {
    expect((maskApiError(located(badInput('first', 'bad')), 'U') as GraphQLError).extensions).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'first' });
    const conflict = maskApiError(located(new IdempotencyKeyConflictError('k', 'id-1', 'differs in input')), 'U') as GraphQLError;
    expect(conflict.extensions).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', executionId: 'id-1' });
    const sqlError = located(Object.assign(new Error('relation "baton_read.x" does not exist'), { code: '42P01' }));
    const masked = maskApiError(sqlError, 'Unexpected error.') as GraphQLError;
    expect(masked.message).toBe('Unexpected error.');
    expect(JSON.stringify(masked.toJSON())).not.toMatch(/relation|baton_read|stack/);
  });
});

describe('cursors', () => {
  it('round-trip a keyset position with microseconds', () => {
    const cursor = { requestedAt: '2030-01-01T00:00:00.123456Z', executionId: '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31' };
    const encoded = encodeCursor(cursor);
    expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(encoded)).toEqual(cursor);
  });

  it('refuse a cursor with padding, another shape or another alphabet', () => {
    const good = encodeCursor({ requestedAt: '2030-01-01T00:00:00.000000Z', executionId: '6f1e7c52-3b0a-4d1e-9a57-0b8c4a2f9d31' });
    for (const bad of [`${good}=`, `+${good.slice(1)}`, '', Buffer.from('[]').toString('base64url')]) {
      expect(() => decodeCursor(bad), bad).toThrow(/^after: not a cursor from this API/);
    }
  });
});

describe('tokens', () => {
  const request = (authorization?: string) => new Request('http://x/graphql', { headers: authorization ? { authorization } : {} });

  it('grant admin, read or nothing; with no token configured, everyone is admin', () => {
    const auth = createApiAuth({ adminToken: 'a-token', readToken: 'r-token' });
    expect(auth.required).toBe(true);
    expect(auth.roleOf(request('Bearer a-token'))).toBe('admin');
    expect(auth.roleOf(request('bearer  r-token '))).toBe('read');
    for (const h of [undefined, 'Bearer', 'Bearer a-tokenx', 'Bearer a-token r-token', 'Token a-token', 'a-token']) {
      expect(auth.roleOf(request(h)), String(h)).toBeUndefined();
    }
    expect(createApiAuth({ readToken: 'r' }).roleOf(request('Bearer r'))).toBe('read');
    const open = createApiAuth({});
    expect(open.required).toBe(false);
    expect(open.roleOf(request())).toBe('admin');
  });

  it('know loopback hosts', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', 'LOCALHOST']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '127.0.0.1.evil.com']) expect(isLoopback(h), h).toBe(false);
  });
});
